// Completion: a one-shot result that one coroutine sets and another awaits (an NBD
// reply matched to its request, a frame that has left through the socket). Setting it
// before anyone waits is fine: the value is kept.
#pragma once

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class Completion {
 public:
  explicit Completion(executor ex) : slot_(ex, 1) {}

  void complete(Status status) {
    if (!done_) {
      done_ = true;
      slot_.try_send(asio::error_code{}, std::move(status));
    }
  }
  bool done() const { return done_; }

  awaitable<Status> wait() {
    auto [ec, status] = co_await slot_.async_receive(use_nothrow);
    if (ec) co_return cancelled();
    co_return status;
  }

 private:
  asio::experimental::channel<void(asio::error_code, Status)> slot_;
  bool done_ = false;
};

}  // namespace sluice
