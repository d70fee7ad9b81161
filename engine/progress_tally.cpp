#include "engine/progress_tally.hpp"

#include <exception>
#include <string>
#include <utility>

namespace sluice {

ProgressTally::ProgressTally(executor home, std::uint64_t total, ProgressCallback callback,
                             std::function<void(Error)> on_failure)
    : home_(std::move(home)),
      total_(total),
      callback_(std::move(callback)),
      on_failure_(std::move(on_failure)),
      started_(clock::now()),
      posted_at_(started_.time_since_epoch().count()),
      reported_at_(started_) {}

void ProgressTally::add_at_home(std::uint64_t bytes) {
  done_.fetch_add(bytes, std::memory_order_acq_rel);
  if (callback_ && !closed_) report_if_due(clock::now());
}

void ProgressTally::add_elsewhere(std::uint64_t bytes) {
  const std::uint64_t before = done_.fetch_add(bytes, std::memory_order_acq_rel);
  if (!callback_) return;
  const std::uint64_t after = before + bytes;
  const bool crossed_step = step() == 0 || before / step() != after / step();
  const auto now = clock::now();
  const clock::rep last = posted_at_.load(std::memory_order_relaxed);
  const bool interval_passed = now.time_since_epoch().count() - last >=
                               std::chrono::duration_cast<clock::duration>(CopyOptions::progress_interval).count();
  if (!crossed_step && !interval_passed && after != total_) return;
  posted_at_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  asio::post(home_, [self = shared_from_this()] {
    if (!self->closed_) self->report_if_due(clock::now());
  });
}

void ProgressTally::close() {
  if (closed_) return;
  closed_ = true;
  if (callback_ && done() == total_ && !(reported_any_ && reported_ == total_)) report(clock::now());
}

void ProgressTally::report_if_due(clock::time_point now) {
  const std::uint64_t done_now = done();
  if (reported_any_ && done_now == reported_) return;
  if (done_now != total_ && done_now - reported_ < step() && now - reported_at_ < CopyOptions::progress_interval)
    return;
  report(now);
}

void ProgressTally::report(clock::time_point now) {
  const std::uint64_t done_now = done();
  reported_ = done_now;
  reported_any_ = true;
  reported_at_ = now;
  // The owner's code: what it throws fails the copy like any stage's error, and must
  // not unwind a stage past the writes it has in flight.
  try {
    callback_(ProgressUpdate{done_now, total_, std::chrono::duration<double>(now - started_).count()});
  } catch (const std::exception& e) {
    closed_ = true;
    on_failure_(Error{std::make_error_code(std::errc::interrupted),
                      std::string("the progress callback failed: ") + e.what()});
  } catch (...) {
    closed_ = true;
    on_failure_(Error{std::make_error_code(std::errc::interrupted), "the progress callback failed"});
  }
}

}  // namespace sluice
