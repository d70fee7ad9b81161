// ServingGate: how a connection's handler tells the ServerLoop that its handshake is
// over. Until then the connection counts against the handshake limit
// (--max-handshakes); from then on against the serving one (--max-connections), so
// clients that connect and never finish their handshake cannot lock out those that do.
//
// enter() fails, naming the limit, when every serving slot stays taken; the handler
// then refuses the client in its protocol's words and may let it try again (an NBD
// client can send another GO). A default-constructed gate counts nothing and always
// lets in (a handler run outside a ServerLoop).
#pragma once

#include <functional>
#include <utility>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class ServingGate {
 public:
  using Claim = std::function<awaitable<Status>()>;

  ServingGate() = default;
  explicit ServingGate(Claim claim) : claim_(std::move(claim)) {}

  // Takes a serving slot (once: later calls find it taken).
  awaitable<Status> enter();
  bool entered() const { return entered_; }

 private:
  Claim claim_;
  bool entered_ = false;
};

}  // namespace sluice
