// A one-way protocol has no error replies: when the receiver gives up (a refused TLS
// client certificate, a bad stream, a full disk) the sender only sees its next send
// fail. Say so, so the message points at the receiver's log rather than the network.
#pragma once

#include <system_error>

#include "engine/error.hpp"

namespace sluice {

inline Status explain_send_failure(Status status) {
  if (status) return status;
  const std::error_code code = status.error().code;
  if (status.error().is_peer_gone())
    return fail(code, status.error().message +
                          " (the receiver closed the connection: it refused the transfer or failed; its log says why)");
  return status;
}

}  // namespace sluice
