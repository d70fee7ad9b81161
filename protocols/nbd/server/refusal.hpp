// Turning an NBD client away before it is served (the server has as many clients in
// the handshake as it takes), in words the client can show its user: the greeting,
// then every option answered with ERR_POLICY carrying `reason`. A client shrugs off an
// error to an optional option (STRUCTURED_REPLY, INFO) and goes on, so each one gets
// it until the client sends GO (whose error it reports) or ABORT (acknowledged), or
// hangs up. EXPORT_NAME, which cannot be answered with an error, ends it, as does
// anything malformed. The caller bounds the time it takes.
#pragma once

#include <string_view>

#include "engine/asio.hpp"
#include "engine/net/stream.hpp"

namespace sluice::nbd {

awaitable<void> refuse_client(Stream& stream, std::string_view reason);

}  // namespace sluice::nbd
