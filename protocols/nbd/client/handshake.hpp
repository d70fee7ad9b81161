// The client's side of the fixed-newstyle handshake, in the order libnbd uses:
//
//   greeting -> client flags -> STARTTLS (when TLS is wanted) -> STRUCTURED_REPLY ->
//   SET_META_CONTEXT base:allocation (when the map is wanted) -> GO asking for block
//   sizes, name and description -> EXPORT_NAME only where GO is not understood.
//
// Old servers are served too: oldstyle (no options at all) and newstyle without the
// fixed extension (EXPORT_NAME only); neither can do TLS.
//
// Every refusal becomes an Error a person can act on ("server refused GO for export
// 'x': unknown export (NBD_REP_ERR_UNKNOWN)"), with a hint where the fix is on our side
// (TLS required: use nbds://). Optional features the server declines (structured
// replies, the allocation map) are simply not used.
#pragma once

#include <memory>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/stream.hpp"
#include "protocols/nbd/client/client_options.hpp"
#include "protocols/nbd/client/negotiated_export.hpp"

namespace sluice::nbd {

struct Negotiated {
  std::unique_ptr<Stream> stream;  // a TLS stream after STARTTLS, else the one given
  NegotiatedExport facts;
};

// Runs the handshake on a freshly connected stream. A stream that is already TLS (an
// https:// import that switched to NBD) satisfies `options.tls` without STARTTLS; a
// plain stream is upgraded, which needs it to be a SocketStream.
awaitable<Result<Negotiated>> negotiate(std::unique_ptr<Stream> stream, const ClientOptions& options);

}  // namespace sluice::nbd
