#include "engine/copy_lane.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "engine/extent_aligner.hpp"
#include "engine/zero_scan.hpp"

namespace sluice {

namespace {

// Largest zero request: big enough that a sparse terabyte costs few round trips, small
// enough for a 32-bit NBD length.
constexpr std::uint64_t max_zero_request = 1ull << 30;

}  // namespace

CopyLane::CopyLane(executor ex, Source& source, Destination& destination, const CopyPlan& plan,
                   const CopyOptions& options, Stripes& stripes, ProgressTally& progress, bool at_home)
    : source_(source),
      destination_(destination),
      plan_(plan),
      options_(options),
      stripes_(stripes),
      progress_(progress),
      at_home_(at_home),
      pool_(ex, plan.buffers, plan.request_size),
      write_slots_(ex, plan.lane_depth),
      data_slots_(ex, plan.data_slots),
      items_(ex, plan.lane_depth),
      filled_(ex, plan.lane_depth * 2),
      stages_(ex, [this](const Error&) { stop(); }),
      grace_(ex, options_.stop_grace,
             [this] {
               source_.abort();
               destination_.abort();
             }),
      scanner_(ex, source, plan, options.mapped_scan_dear_ratio, stats_,
               [this](WorkItem piece) { return pass_on(std::move(piece)); }) {}

// Cancellation is the copy's to subscribe to: it stops every lane.
awaitable<Status> CopyLane::run() {
  stages_.spawn(expand());
  stages_.spawn(read_stage());
  stages_.spawn(write_stage());
  Status status = co_await stages_.join();
  grace_.end();
  stats_.peak_buffers = pool_.high_water();
  if (status && stopped_) status = tl::unexpected(cancelled_error());
  co_return status;
}

// Turns the source's extent map of each stripe it claims into work items: aligned for
// the destination, no larger than one request (data) or max_zero_request (zeros), split
// on multiples of the request size. The items of all its stripes go down one channel,
// in the order claimed, which is offset order when the lane is alone.
awaitable<Status> CopyLane::expand() {
  std::uint64_t seq = 0;
  while (auto stripe = stripes_.claim()) {
    if (Status s = co_await expand_stripe(*stripe, seq); !s) co_return s;
  }
  // Named, not a temporary in the co_await expression (g++ 12 coroutine lifetime bug).
  WorkItem end{seq, {}, Buffer{}, true, std::nullopt};
  auto [ec] = co_await items_.async_send(asio::error_code{}, std::move(end), use_nothrow);
  if (ec) co_return cancelled();
  co_return Status{};
}

awaitable<Status> CopyLane::expand_stripe(const Stripe& stripe, std::uint64_t& seq) {
  // Stripe ends lie on the alignment (copy() sizes them so), so each stripe aligns on
  // its own as the whole image would.
  ExtentAligner aligner(plan_.alignment, stripe.end());
  counted_any_ = false;
  std::uint64_t offset = stripe.offset;
  while (offset < stripe.end()) {
    auto extents = co_await source_.extents(offset, std::min(options_.extent_window, stripe.end() - offset));
    if (!extents) co_return tl::unexpected(extents.error());
    if (extents->empty())
      co_return fail_at("reading the extent map (no extents returned)", offset,
                        std::make_error_code(std::errc::protocol_error));
    for (const Extent& extent : *extents) {
      if (offset >= stripe.end()) break;
      if (extent.offset != offset || extent.length == 0)
        co_return fail_at("reading the extent map (extents not contiguous)", offset,
                          std::make_error_code(std::errc::protocol_error));
      Extent clamped{offset, std::min(extent.end(), stripe.end()) - offset, extent.kind};
      count_extent(clamped);
      offset = clamped.end();
      for (const Extent& aligned : aligner.push(clamped))
        if (!co_await emit(aligned, seq)) co_return cancelled();
    }
  }
  for (const Extent& aligned : aligner.finish())
    if (!co_await emit(aligned, seq)) co_return cancelled();
  if (counted_any_) stripes_.record_edges(stripe.index, stripe_first_kind_, counted_kind_);
  co_return Status{};
}

awaitable<bool> CopyLane::emit(const Extent& extent, std::uint64_t& seq) {
  const std::uint64_t limit = extent.kind == ExtentKind::data ? plan_.request_size : max_zero_request;
  for (std::uint64_t offset = extent.offset; offset < extent.end();) {
    std::uint64_t length = std::min(extent.end() - offset, limit - offset % limit);
    WorkItem item{seq++, Extent{offset, length, extent.kind}, Buffer{}, false, std::nullopt};
    auto [ec] = co_await items_.async_send(asio::error_code{}, std::move(item), use_nothrow);
    if (ec) co_return false;
    offset += length;
  }
  co_return true;
}

// Starts a read for each data item as soon as a buffer is free (or a scan in place as
// soon as a scan slot is); zero items pass on.
awaitable<Status> CopyLane::read_stage() {
  // A read's failure is the copy's at once (see record_root_cause).
  TaskGroup reads(co_await asio::this_coro::executor, [this](const Error& e) { record_root_cause(e); });
  std::uint64_t end_seq = 0;
  for (bool more = true; more;) {
    auto [ec, item] = co_await items_.async_receive(use_nothrow);
    if (ec) break;
    if (item.end) {
      end_seq = item.seq;
      break;
    }
    switch (read_way(item)) {
      case ReadWay::pass_on:
        more = co_await pass_on(std::move(item));
        break;
      case ReadWay::by_reference:
        mark_by_reference(item);
        more = co_await pass_on(std::move(item));
        break;
      case ReadWay::scan_in_place:
        more = static_cast<bool>(co_await scanner_.acquire());
        if (more) reads.spawn(scanner_.scan(std::move(item)));
        break;
      case ReadWay::into_buffer: {
        auto buffer = co_await pool_.acquire();
        // Closed by stop() is a sibling's failure, reported by that sibling; anything
        // else (memory) is this stage's own and must not pass for the end of the data.
        if (!buffer && !stopped_) reads.fail(buffer.error());
        more = static_cast<bool>(buffer);
        if (more) reads.spawn(read_one(std::move(item), std::move(*buffer)));
        break;
      }
    }
  }
  Status status = co_await reads.join();
  if (!status) co_return status;
  if (stopped_) co_return cancelled();
  WorkItem end{end_seq, {}, Buffer{}, true, std::nullopt};
  if (!co_await pass_on(std::move(end))) co_return cancelled();
  co_return Status{};
}

// Zeros need no read. Data goes by reference where the plan says so, scanned in place
// first where zeros are looked for, unless scanning in place gave way to buffers.
CopyLane::ReadWay CopyLane::read_way(const WorkItem& item) const {
  if (item.extent.kind != ExtentKind::data) return ReadWay::pass_on;
  if (!plan_.by_reference) return ReadWay::into_buffer;
  if (plan_.zero_scan == ZeroScan::none) return ReadWay::by_reference;
  return scanner_.in_use() ? ReadWay::scan_in_place : ReadWay::into_buffer;
}

// The write stage's slots bound what is in flight; there is no buffer to hold.
void CopyLane::mark_by_reference(WorkItem& item) {
  item.file = source_.file_slice(item.extent.offset, item.extent.length);
  ++stats_.reads;
  stats_.bytes_read += item.extent.length;
}

awaitable<Status> CopyLane::read_one(WorkItem item, Buffer buffer) {
  buffer.truncate(item.extent.length);
  ++stats_.reads;
  Status status = co_await source_.read(item.extent.offset, buffer.writable());
  if (!status) co_return status;
  stats_.bytes_read += item.extent.length;
  if (plan_.zero_scan == ZeroScan::none) {
    item.data = std::move(buffer);
    if (!co_await pass_on(std::move(item))) co_return cancelled();
    co_return Status{};
  }
  // Each data run keeps a share of the block; a run after a zero run may put its
  // header into those zeros, which nobody sends.
  auto runs = scan_zero_runs(buffer.bytes(), item.extent.offset, plan_.sparse);
  std::size_t free_before = buffer.headroom();
  for (const Run& run : runs) {
    WorkItem piece{item.seq, Extent{item.extent.offset + run.offset, run.length,
                                    run.zero ? ExtentKind::zero : ExtentKind::data},
                   Buffer{}, false, std::nullopt};
    if (!run.zero) piece.data = buffer.share(run.offset, run.length, free_before);
    free_before = run.zero ? run.length : 0;
    if (!co_await pass_on(std::move(piece))) co_return cancelled();
  }
  co_return Status{};
}

awaitable<bool> CopyLane::pass_on(WorkItem item) {
  auto [ec] = co_await filled_.async_send(asio::error_code{}, std::move(item), use_nothrow);
  co_return !ec;
}

awaitable<Status> CopyLane::write_stage() {
  // A write's failure is the copy's at once (see record_root_cause).
  TaskGroup writes(co_await asio::this_coro::executor, [this](const Error& e) { record_root_cause(e); });
  std::map<std::uint64_t, WorkItem> waiting;  // ordered destinations only
  std::uint64_t next_seq = 0;
  bool ended = false;
  while (!ended) {
    auto [ec, item] = co_await filled_.async_receive(use_nothrow);
    if (ec) break;
    if (!plan_.ordered) {
      if (item.end) break;
      if (skip_if_zero(item)) continue;
      Credits& slots = slots_for(item);
      if (!co_await slots.acquire()) break;
      writes.spawn(write_one(std::move(item), &slots));
      continue;
    }
    // One request at a time, in offset order: reads finish out of order.
    waiting.emplace(item.seq, std::move(item));
    while (!waiting.empty() && waiting.begin()->first == next_seq) {
      WorkItem next = std::move(waiting.begin()->second);
      waiting.erase(waiting.begin());
      ++next_seq;
      if (next.end) {
        ended = true;
        break;
      }
      if (skip_if_zero(next)) continue;
      if (Status s = co_await write_one(std::move(next), nullptr); !s) {
        writes.fail(s.error());
        ended = true;
        break;
      }
    }
  }
  Status status = co_await writes.join();
  if (!status) co_return status;
  if (stopped_) co_return cancelled();
  co_return Status{};
}

bool CopyLane::skip_if_zero(const WorkItem& item) {
  if (item.extent.kind == ExtentKind::data || !plan_.skip_zero_ranges) return false;
  stats_.bytes_skipped += item.extent.length;
  completed(item.extent.length);
  return true;
}

Credits& CopyLane::slots_for(const WorkItem& item) {
  return plan_.data_slots > 0 && item.extent.kind == ExtentKind::data ? data_slots_ : write_slots_;
}

// `slot`: the credit it holds, given back once it has completed (none when ordered).
awaitable<Status> CopyLane::write_one(WorkItem item, Credits* slot) {
  const Extent extent = item.extent;
  Status status;
  if (extent.kind == ExtentKind::data) {
    ++stats_.writes;
    if (item.file) {
      ++stats_.zero_copy_writes;
      status = co_await destination_.write_file(extent.offset, *item.file);
    } else {
      status = co_await destination_.write(extent.offset, std::move(item.data));
    }
    if (status) stats_.bytes_written += extent.length;
  } else {
    ++stats_.zero_requests;
    status = co_await destination_.zero(extent.offset, extent.length,
                                        options_.allocated ? ZeroMode::allocate : ZeroMode::may_punch);
    if (status) stats_.bytes_zeroed += extent.length;
  }
  if (slot != nullptr) slot->release();
  if (status) completed(extent.length);
  co_return status;
}

void CopyLane::completed(std::uint64_t bytes) {
  if (at_home_)
    progress_.add_at_home(bytes);
  else
    progress_.add_elsewhere(bytes);
}

// A map is asked for window by window, and an extent that spans windows comes back
// in pieces: it is one extent.
void CopyLane::count_extent(const Extent& extent) {
  const bool continues = counted_any_ && extent.offset == counted_end_ && extent.kind == counted_kind_;
  if (!counted_any_) stripe_first_kind_ = extent.kind;
  counted_any_ = true;
  counted_end_ = extent.end();
  counted_kind_ = extent.kind;
  if (continues) return;
  switch (extent.kind) {
    case ExtentKind::data: ++stats_.data_extents; break;
    case ExtentKind::zero: ++stats_.zero_extents; break;
    case ExtentKind::hole: ++stats_.hole_extents; break;
  }
}

// A stage failed, or the copy is stopping: nothing new is issued, and everything that
// waits is woken, so each stage returns once what it has in flight has completed.
// What has not within the grace period is cut off: both ends are aborted.
void CopyLane::stop() {
  if (stopped_) return;
  stopped_ = true;
  // close() alone wakes only waiting receivers; cancel() also wakes senders blocked
  // on a full channel (Asio 1.22).
  items_.cancel();
  items_.close();
  filled_.cancel();
  filled_.close();
  pool_.close();
  write_slots_.close();
  data_slots_.close();
  scanner_.close();
  grace_.start();
}

}  // namespace sluice
