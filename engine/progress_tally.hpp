// ProgressTally: the bytes a copy has completed, added by its lanes from their own
// threads, and the calls to the owner's progress callback, which are always made on
// the copy's own loop (the "home" lane's) so the owner never needs a lock.
//
// Calls are throttled as CopyOptions::progress says: another 1% of the image or
// another progress_interval since the last call, and the end. A lane on another thread
// asks for a call by posting to the home loop only when its addition crosses a 1% step
// or the interval has passed, so a copy in 4 KiB pieces does not flood that loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/asio.hpp"
#include "engine/copy_options.hpp"
#include "engine/error.hpp"

namespace sluice {

class ProgressTally : public std::enable_shared_from_this<ProgressTally> {
 public:
  using clock = std::chrono::steady_clock;

  // `on_failure` runs on the home loop when the callback throws.
  ProgressTally(executor home, std::uint64_t total, ProgressCallback callback,
                std::function<void(Error)> on_failure);

  // From the home loop's thread.
  void add_at_home(std::uint64_t bytes);
  // From any other thread.
  void add_elsewhere(std::uint64_t bytes);

  std::uint64_t done() const { return done_.load(std::memory_order_acquire); }

  // The last call, when every byte completed and it was not made yet; no call after
  // this (one posted by a lane but not yet run is dropped). On the home loop.
  void close();

 private:
  void report_if_due(clock::time_point now);
  void report(clock::time_point now);
  std::uint64_t step() const { return total_ / 100; }

  executor home_;
  std::uint64_t total_;
  ProgressCallback callback_;
  std::function<void(Error)> on_failure_;
  clock::time_point started_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<clock::rep> posted_at_;  // when a lane elsewhere last asked for a call
  // Home loop only.
  std::uint64_t reported_ = 0;
  bool reported_any_ = false;
  clock::time_point reported_at_;
  bool closed_ = false;
};

}  // namespace sluice
