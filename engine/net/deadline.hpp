// Deadline: bounds a wait on a peer. When the time is up it shuts the socket down (or
// aborts the stream), which makes whatever waits on it fail promptly; fired() then
// tells the caller to report a timeout rather than the failure that caused.
//
// The socket's descriptor survives STARTTLS (the socket moves into the TLS stream),
// so shutting it down reaches a TLS handshake too. The state is shared with the
// timer's handler, which may run after this object is gone (it then finds the
// deadline disarmed). A zero timeout arms nothing.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <memory>

#include <asio/steady_timer.hpp>

#include "engine/asio.hpp"
#include "engine/net/stream.hpp"

namespace sluice {

class Deadline {
 public:
  // Shuts `fd` down when it fires, else aborts `stream` (either may be absent).
  Deadline(executor ex, std::chrono::seconds timeout, int fd, Stream* stream)
      : timer_(ex), state_(std::make_shared<State>(State{true, false, fd, stream})) {
    if (timeout.count() <= 0) return;
    timer_.expires_after(timeout);
    timer_.async_wait([state = state_](const asio::error_code& ec) {
      if (ec || !state->armed) return;
      state->fired = true;
      if (state->fd >= 0)
        ::shutdown(state->fd, SHUT_RDWR);
      else if (state->stream != nullptr)
        state->stream->abort();
    });
  }
  ~Deadline() { disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Must be called as soon as the bounded wait returns, before the socket may be closed.
  void disarm() {
    state_->armed = false;
    timer_.cancel();
  }
  bool fired() const { return state_->fired; }

 private:
  struct State {
    bool armed;
    bool fired;
    int fd;
    Stream* stream;
  };
  asio::steady_timer timer_;
  std::shared_ptr<State> state_;
};

}  // namespace sluice
