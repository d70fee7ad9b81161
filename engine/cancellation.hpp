// Cancellation: lets the owner of a transfer stop it from outside the copy (a daemon
// cancelling one of many transfers, a CLI on SIGINT). Single-threaded, like the copy
// it belongs to: call request() on the copy's executor.
#pragma once

#include <functional>
#include <utility>

namespace sluice {

class Cancellation {
 public:
  void request() {
    requested_ = true;
    if (on_request_) std::exchange(on_request_, nullptr)();
  }
  bool requested() const { return requested_; }

  // What to run on request(); runs at once if cancellation was already requested.
  void on_request(std::function<void()> callback) {
    if (requested_) {
      callback();
      return;
    }
    on_request_ = std::move(callback);
  }
  void clear() { on_request_ = nullptr; }

 private:
  bool requested_ = false;
  std::function<void()> on_request_;
};

}  // namespace sluice
