// Copy scenarios that the one-lane and the lane tests both run, each against its own
// endpoints: the checks after them are the same whatever ran the copy.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/cancellation.hpp"
#include "engine/copier.hpp"
#include "run_loop.hpp"

namespace sluice::test {

// Slows the sink's writes so the copy is still running when another thread cancels it
// 20 ms in; the copy must fail as cancelled with nothing in flight and not finish.
template <class Sink>
void expect_cancelled_from_another_thread(Source& source, Sink& sink, CopyOptions options) {
  sink.write_delay = std::chrono::milliseconds(5);
  Cancellation cancel;
  options.cancellation = &cancel;
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cancel.request();
  });
  auto stats = run(copy(source, sink, options));
  other.join();
  REQUIRE_FALSE(stats);
  CHECK(stats.error().message == "the transfer was cancelled");
  CHECK(sink.in_flight == 0);
  CHECK_FALSE(sink.finished);
}

// A progress callback throws once `after` bytes are done: the copy fails with what it
// threw, every write accounted for, and does not finish.
template <class Sink>
void expect_progress_failure_reported(Source& source, Sink& sink, CopyOptions options, std::uint64_t after) {
  options.progress = [after](const ProgressUpdate& u) {
    if (u.done > after) throw std::runtime_error("the toolstack went away");
  };
  auto stats = run(copy(source, sink, options));
  REQUIRE_FALSE(stats);
  CHECK(stats.error().message == "the progress callback failed: the toolstack went away");
  CHECK(sink.in_flight == 0);
  CHECK_FALSE(sink.finished);
}

// 4 KiB of data, 4 KiB of zeros, over and over: zero detection completes 4 KiB pieces.
inline std::vector<std::byte> alternating_pieces(std::uint64_t size) {
  std::vector<std::byte> image(size);
  for (std::uint64_t i = 0; i < size; i += 8192)
    std::fill_n(image.begin() + static_cast<std::ptrdiff_t>(i), 4096, std::byte{7});
  return image;
}

// A copy with zero detection at 4 KiB, counting the progress calls it makes.
struct CountedProgress {
  Result<TransferStats> stats = fail(std::errc::io_error, "not run");
  int calls = 0;
  ProgressUpdate last;
  double seconds = 0;
  // The calls allowed: one per 1% and one per 50 ms from each of `sources` places
  // that ask for them, plus the last.
  int bound(int sources) const { return sources * (101 + static_cast<int>(seconds / 0.05)) + 1; }
};

inline CountedProgress count_progress_calls(Source& source, Destination& destination, CopyOptions options) {
  CountedProgress counted;
  options.sparse = 4096;
  options.progress = [&counted](const ProgressUpdate& u) {
    ++counted.calls;
    counted.last = u;
  };
  const auto started = std::chrono::steady_clock::now();
  counted.stats = run(copy(source, destination, options));
  counted.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return counted;
}

}  // namespace sluice::test
