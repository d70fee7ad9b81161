// Deadline: bounds a wait on a peer. When the time is up, or the transfer is cancelled,
// it shuts the socket down (or aborts the stream), which makes whatever waits on it
// fail promptly; fired() or cancelled() then tells the caller to report a timeout or
// the cancellation rather than the failure that caused.
//
// The socket's descriptor survives STARTTLS (the socket moves into the TLS stream),
// so shutting it down reaches a TLS handshake too. The state is shared with the
// timer's handler, which may run after this object is gone (it then finds the
// deadline disarmed). A zero timeout arms no timer; a cancellation still counts.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <memory>

#include <asio/steady_timer.hpp>

#include "engine/asio.hpp"
#include "engine/cancellation.hpp"
#include "engine/net/stream.hpp"

namespace sluice {

class Deadline {
 public:
  // Shuts `fd` down when it fires, else aborts `stream` (either may be absent).
  Deadline(executor ex, std::chrono::seconds timeout, int fd, Stream* stream, Cancellation* cancellation = nullptr)
      : timer_(ex), state_(std::make_shared<State>(State{true, false, false, fd, stream})) {
    if (cancellation != nullptr)
      subscription_ = cancellation->on_request(ex, [state = state_] { cut(*state, &State::cancelled); });
    if (timeout.count() <= 0) return;
    timer_.expires_after(timeout);
    timer_.async_wait([state = state_](const asio::error_code& ec) {
      if (!ec) cut(*state, &State::fired);
    });
  }
  ~Deadline() { disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Must be called as soon as the bounded wait returns, before the socket may be closed.
  void disarm() {
    state_->armed = false;
    timer_.cancel();
    subscription_.reset();
  }
  bool fired() const { return state_->fired; }
  bool cancelled() const { return state_->cancelled; }

 private:
  struct State {
    bool armed;
    bool fired;
    bool cancelled;
    int fd;
    Stream* stream;
  };
  static void cut(State& state, bool State::*why) {
    if (!state.armed) return;
    state.*why = true;
    state.armed = false;
    if (state.fd >= 0)
      ::shutdown(state.fd, SHUT_RDWR);
    else if (state.stream != nullptr)
      state.stream->abort();
  }

  asio::steady_timer timer_;
  std::shared_ptr<State> state_;
  Cancellation::Subscription subscription_;
};

}  // namespace sluice
