#include "engine/copier.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/copy_lane.hpp"
#include "engine/copy_plan.hpp"
#include "engine/grace_period.hpp"
#include "engine/loop_threads.hpp"
#include "engine/progress_tally.hpp"
#include "engine/run_on.hpp"
#include "engine/stripes.hpp"
#include "engine/task_group.hpp"

namespace sluice {

namespace {

using clock = std::chrono::steady_clock;

// Runs the lanes, lane 0 on the caller's loop and each other on one of the
// destination's loops or on a loop thread of the copier's own, then flushes and
// finishes the destination on the caller's loop. The first lane to fail stops the
// others.
class Copier {
 public:
  // `loops`: the destination's, where its lanes run on loops of its own (lane i on
  // loops[i]); empty: the copier starts a loop for each lane after the first.
  Copier(Source& source, Destination& destination, CopyOptions options, const CopyPlan& plan,
         std::vector<executor> loops)
      : source_(source),
        destination_(destination),
        options_(std::move(options)),
        plan_(plan),
        lanes_(plan.lanes),
        executors_(std::move(loops)) {}

  awaitable<Result<TransferStats>> run() {
    const auto started = clock::now();
    const executor home = co_await asio::this_coro::executor;
    const std::uint64_t size = source_.size();
    // Outlives this copier if a lane's report is still queued; close() makes it inert.
    auto progress = std::make_shared<ProgressTally>(home, size, options_.progress, [this](Error error) {
      if (!failed_) failed_.emplace(std::move(error));
      stop_lanes();
    });
    Stripes stripes(size, plan_.stripe_size);
    // The destination's loops, or loops of the copier's own.
    const bool own_loops = executors_.empty();
    threads_.emplace(own_loops ? lanes_ - 1 : 0);
    if (own_loops) {
      executors_.push_back(home);
      for (std::size_t i = 0; i + 1 < lanes_; ++i) executors_.push_back(threads_->at(i));
    }
    for (std::size_t i = 0; i < lanes_; ++i)
      lanes_running_.push_back(std::make_shared<CopyLane>(executors_[i], source_, destination_, plan_, options_,
                                                          stripes, *progress, i == 0));
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
    stats.plan = plan_;
    return stats;
  }

  Source& source_;
  Destination& destination_;
  CopyOptions options_;
  CopyPlan plan_;
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
  const executor home = co_await asio::this_coro::executor;
  const DestinationTraits to = destination.traits();
  // A destination that runs lanes on loops of its own can have no more lanes than it
  // has loops, and only one if its first loop is not the caller's (lane 0 runs there).
  std::vector<executor> loops = to.takes_lanes ? destination.lane_loops() : std::vector<executor>{};
  const std::size_t lane_loops = loops.empty() ? 0 : loops.front() == home ? loops.size() : 1;
  const std::size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  auto plan = plan_copy(options, source.traits(), to, source.size(), cpus, lane_loops);
  if (!plan) co_return tl::unexpected(plan.error());
  if (plan->lanes > 1) {
    source.serve_lanes();
    destination.serve_lanes();
    if (!loops.empty()) loops.resize(plan->lanes);
  } else {
    loops.clear();
  }
  Copier copier(source, destination, std::move(options), *plan, std::move(loops));
  co_return co_await copier.run();
}

}  // namespace sluice
