// Cancellation: lets the owner of a transfer stop it from outside the copy (a daemon
// cancelling one of many transfers from its RPC thread, a CLI on SIGINT, a deadline).
//
// request() may be called from any thread, any number of times. Whatever must stop
// subscribes with the executor it lives on: the copy's stages, and every wait on a
// peer while the endpoints open (Deadline). A request posts each subscriber's callback
// to its own executor, so the callback runs on the thread that owns what it touches,
// and never after its Subscription is gone (which is destroyed on that same thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class Cancellation {
 public:
  class Subscription;

  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Thread-safe.
  void request();
  bool requested() const { return requested_.load(std::memory_order_acquire); }

  // Runs `callback` on `ex` once cancellation is requested (soon, if it already was),
  // unless the returned Subscription has been destroyed first. The Subscription must
  // be destroyed on `ex`'s thread, and before this Cancellation.
  [[nodiscard]] Subscription on_request(executor ex, std::function<void()> callback);

 private:
  void unsubscribe(std::uint64_t id);

  std::atomic<bool> requested_{false};
  std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::function<void()>> subscribers_;  // each posts to its executor
};

class Cancellation::Subscription {
 public:
  Subscription() = default;
  Subscription(Subscription&& other) noexcept { *this = std::move(other); }
  Subscription& operator=(Subscription&& other) noexcept;
  ~Subscription() { reset(); }

  // Unsubscribes now; a callback already posted will not run.
  void reset();

 private:
  friend class Cancellation;
  Subscription(Cancellation* owner, std::uint64_t id, std::shared_ptr<bool> alive)
      : owner_(owner), id_(id), alive_(std::move(alive)) {}

  Cancellation* owner_ = nullptr;
  std::uint64_t id_ = 0;
  std::shared_ptr<bool> alive_;  // read and cleared on the subscriber's thread only
};

// The error a cancelled transfer reports, wherever it was when it stopped.
Error cancelled_error();

}  // namespace sluice
