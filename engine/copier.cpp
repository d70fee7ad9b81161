#include "engine/copier.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/copy_lane.hpp"
#include "engine/grace_period.hpp"
#include "engine/loop_threads.hpp"
#include "engine/progress_tally.hpp"
#include "engine/run_on.hpp"
#include "engine/stripes.hpp"
#include "engine/task_group.hpp"

namespace sluice {

namespace {

using clock = std::chrono::steady_clock;

// By reference where both ends allow it (and, unless asked for always, where the
// destination says it pays); zero detection then scans a mapping of the source
// instead of a buffer.
bool payload_by_reference(const CopyOptions& options, Source& source, Destination& destination) {
  const bool wanted = options.zero_copy == ZeroCopy::always      ? destination.takes_file_slices()
                      : options.zero_copy == ZeroCopy::automatic ? destination.file_slices_pay()
                                                                 : false;
  return wanted && source.file_slice(0, 0).has_value();
}

// The lanes this copy runs in and the loops they run on, lane 0 on the caller's.
struct LanePlan {
  std::size_t lanes = 1;
  // The destination's loops where it has its own (lane i on loops[i]); empty: the
  // copier starts a loop for each lane after the first.
  std::vector<executor> loops;
};

// More than one lane only where lanes_for says it could and both ends agree, and no
// more than the destination has loops where it names its own. The source is asked
// last: one that agrees changes how it reads.
LanePlan agreed_lanes(const CopyOptions& options, Source& source, Destination& destination, const executor& home) {
  const std::size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  LanePlan plan;
  std::size_t lanes = lanes_for(options, source.size(), cpus);
  if (lanes == 1 || !destination.traits().takes_lanes) return plan;
  plan.loops = destination.lane_loops();
  if (!plan.loops.empty()) {
    // Lane 0 is the caller's: a destination opened on another loop cannot have it.
    if (plan.loops.front() != home) return LanePlan{};
    lanes = std::min(lanes, plan.loops.size());
    plan.loops.resize(lanes);
  }
  if (lanes == 1 || !source.serve_lanes()) return LanePlan{};
  destination.serve_lanes();
  plan.lanes = lanes;
  return plan;
}

// Runs the lanes, lane 0 on the caller's loop and each other on one of the
// destination's loops or on a loop thread of the copier's own, then flushes and
// finishes the destination on the caller's loop. The first lane to fail stops the
// others.
class Copier {
 public:
  Copier(Source& source, Destination& destination, CopyOptions options, std::chrono::microseconds round_trip,
         bool by_reference, LanePlan plan)
      : source_(source),
        destination_(destination),
        options_(std::move(options)),
        round_trip_(round_trip),
        by_reference_(by_reference),
        lanes_(plan.lanes),
        executors_(std::move(plan.loops)) {}

  awaitable<Result<TransferStats>> run() {
    const auto started = clock::now();
    const executor home = co_await asio::this_coro::executor;
    const std::uint64_t size = source_.size();
    // Outlives this copier if a lane's report is still queued; close() makes it inert.
    auto progress = std::make_shared<ProgressTally>(home, size, options_.progress, [this](Error error) {
      if (!failed_) failed_.emplace(std::move(error));
      stop_lanes();
    });
    Stripes stripes(size, lanes_ > 1 ? stripe_size_for(options_) : 0);
    CopyOptions lane_options = options_;
    lane_options.depth = options_.depth / lanes_;
    lane_options.cancellation = nullptr;  // subscribed here, for every lane at once
    // The destination's loops, or loops of the copier's own.
    const bool own_loops = executors_.empty();
    threads_.emplace(own_loops ? lanes_ - 1 : 0);
    if (own_loops) {
      executors_.push_back(home);
      for (std::size_t i = 0; i + 1 < lanes_; ++i) executors_.push_back(threads_->at(i));
    }
    for (std::size_t i = 0; i < lanes_; ++i)
      lanes_running_.push_back(std::make_shared<CopyLane>(executors_[i], source_, destination_, lane_options,
                                                          by_reference_, stripes, *progress, i == 0));
    // Each lane bounds its own wind-down; this bounds the flush and the finish, which a
    // cancellation lets run for as long as the lanes' requests: then it aborts the
    // destination, and they fail.
    finish_grace_.emplace(home, options_.stop_grace, [this] { destination_.abort(); });
    // Held through finish().
    Cancellation::Subscription cancelled;
    if (options_.cancellation) {
      cancelled = options_.cancellation->on_request(home, [this] {
        stopped_ = true;
        if (!failed_) failed_.emplace(cancelled_error());
        stop_lanes();
        finish_grace_->start();
      });
    }
    threads_->start();
    Status status = co_await run_lanes();
    TransferStats stats = gather(stripes);
    co_await release_lanes();
    // Quick: every lane has ended, so each loop has nothing left but queued stops.
    threads_->stop();
    progress->close();
    if (status && failed_) status = tl::unexpected(*failed_);
    // Every lane ended cleanly, so every byte must have completed: a shortfall is a
    // bug that would otherwise be a silent short copy with exit status 0.
    if (status && progress->done() < size)
      status = fail(std::errc::io_error, "the copy stopped after " + std::to_string(progress->done()) + " of " +
                                             std::to_string(size) + " bytes with no error reported");
    if (status) {
      status = co_await finish();
      // Cancelled meanwhile: the cancellation is the outcome, and what failed, failed of it.
      if (stopped_) status = tl::unexpected(cancelled_error());
    }
    finish_grace_->end();
    source_.add_stats(stats);
    destination_.add_stats(stats);
    stats.seconds = std::chrono::duration<double>(clock::now() - started).count();
    if (!status) co_return tl::unexpected(status.error());
    co_return stats;
  }

 private:
  awaitable<Status> run_lanes() {
    TaskGroup lanes(co_await asio::this_coro::executor, [this](const Error&) { stop_lanes(); });
    for (std::size_t i = 0; i < lanes_running_.size(); ++i)
      lanes.spawn(run_on(executors_[i], lanes_running_[i]->run()));
    Status status = co_await lanes.join();
    // A progress callback's failure or a cancellation is the copy's error, not the
    // cancellations it caused in the lanes.
    if (failed_) co_return tl::unexpected(*failed_);
    co_return status;
  }

  // Each lane is stopped on its own loop. A lane that already ended ignores it; a stop
  // still queued when the loops end is dropped with them.
  void stop_lanes() {
    for (std::size_t i = 0; i < lanes_running_.size(); ++i) {
      if (i == 0) {
        lanes_running_[0]->stop();
        continue;
      }
      asio::post(executors_[i], [lane = std::weak_ptr<CopyLane>(lanes_running_[i])] {
        if (auto running = lane.lock()) running->stop();
      });
    }
  }

  // Each lane goes on its own loop, where its timers and channels are bound: a loop
  // the destination owns is still running. A stop queued there for a lane that is
  // gone finds nothing.
  awaitable<void> release_lanes() {
    for (std::size_t i = 1; i < lanes_running_.size(); ++i)
      co_await run_on(executors_[i], release(std::move(lanes_running_[i])));
    lanes_running_.resize(1);
  }

  static awaitable<void> release(std::shared_ptr<CopyLane> lane) {
    lane.reset();
    co_return;
  }

  awaitable<Status> finish() {
    if (options_.flush) {
      if (Status s = co_await destination_.flush(); !s) co_return s;
    }
    co_return co_await destination_.finish();
  }

  TransferStats gather(const Stripes& stripes) const {
    TransferStats stats;
    for (const auto& lane : lanes_running_) {
      const TransferStats& part = lane->stats();
      stats.bytes_read += part.bytes_read;
      stats.bytes_written += part.bytes_written;
      stats.bytes_zeroed += part.bytes_zeroed;
      stats.bytes_skipped += part.bytes_skipped;
      stats.data_extents += part.data_extents;
      stats.zero_extents += part.zero_extents;
      stats.hole_extents += part.hole_extents;
      stats.reads += part.reads;
      stats.writes += part.writes;
      stats.zero_requests += part.zero_requests;
      stats.zero_copy_writes += part.zero_copy_writes;
      // The lanes' peaks may not have come at once: an upper bound.
      stats.peak_buffers += part.peak_buffers;
      if (part.mapped_scan_gave_way) stats.mapped_scan_gave_way = part.mapped_scan_gave_way;
    }
    stats.data_extents -= stripes.counted_twice(ExtentKind::data);
    stats.zero_extents -= stripes.counted_twice(ExtentKind::zero);
    stats.hole_extents -= stripes.counted_twice(ExtentKind::hole);
    stats.size = source_.size();
    stats.depth = options_.depth / lanes_ * lanes_;
    stats.request_size = options_.request_size;
    stats.round_trip_us = static_cast<std::uint64_t>(round_trip_.count());
    stats.lanes = lanes_;
    return stats;
  }

  Source& source_;
  Destination& destination_;
  CopyOptions options_;
  std::chrono::microseconds round_trip_;
  bool by_reference_;
  std::size_t lanes_;
  // The loops of lanes 1.., declared before what is bound to them, which must go first.
  std::optional<LoopThreads> threads_;
  std::vector<executor> executors_;  // lane i runs on executors_[i]; 0 is the caller's
  std::vector<std::shared_ptr<CopyLane>> lanes_running_;
  std::optional<GracePeriod> finish_grace_;  // started by a cancellation
  std::optional<Error> failed_;  // the first of a progress callback's failure or a cancellation
  bool stopped_ = false;         // cancelled
};

}  // namespace

awaitable<Result<TransferStats>> copy(Source& source, Destination& destination, CopyOptions options) {
  const bool by_reference = payload_by_reference(options, source, destination);
  options.request_size = request_size_for(options, by_reference);
  auto settled = settle_sizes(options, source.block_sizes(), destination.traits().block_sizes);
  if (!settled) co_return tl::unexpected(settled.error());
  const std::chrono::microseconds round_trip = std::max(source.round_trip(), destination.traits().round_trip);
  options.depth = depth_for(options, round_trip);
  LanePlan plan = agreed_lanes(options, source, destination, co_await asio::this_coro::executor);
  Copier copier(source, destination, std::move(options), round_trip, by_reference, std::move(plan));
  co_return co_await copier.run();
}

}  // namespace sluice
