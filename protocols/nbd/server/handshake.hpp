// The server's side of the fixed-newstyle handshake: greeting, client flags, then
// option haggling until the client picks an export (EXPORT_NAME or GO) or leaves
// (ABORT, or closing the connection).
//
// Options spoken: EXPORT_NAME, GO and INFO (size and flags, name, description, block
// sizes), LIST, ABORT, STARTTLS, STRUCTURED_REPLY, LIST_ and SET_META_CONTEXT for
// base:allocation. Anything else gets ERR_UNSUP. With TLS required, every option but
// STARTTLS and ABORT gets ERR_TLS_REQD until TLS is up, and EXPORT_NAME (which cannot
// be refused) closes the connection. A full server (the gate) refuses GO with
// ERR_POLICY and closes on EXPORT_NAME.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/serving_gate.hpp"
#include "engine/net/stream.hpp"
#include "protocols/nbd/server/exports.hpp"

namespace sluice::nbd {

struct Negotiated {
  const ServerExport* chosen = nullptr;
  std::uint16_t flags = 0;  // transmission flags sent
  bool structured_replies = false;
  // base:allocation was selected, for the chosen export, with this id.
  bool allocation_context = false;
  std::uint32_t allocation_context_id = 0;
};

// Runs the handshake on `stream`, which STARTTLS replaces with a TLS stream. Nothing
// (and no error) when the client ended the session itself, or chose an export with
// EXPORT_NAME while `gate` said no (GO gets ERR_POLICY with the gate's reason instead,
// and the haggling goes on).
awaitable<Result<std::optional<Negotiated>>> negotiate(std::unique_ptr<Stream>& stream,
                                                      const ServerConfig& config, ServingGate& gate);

}  // namespace sluice::nbd
