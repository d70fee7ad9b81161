#include "engine/copy_lane.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/extent_aligner.hpp"
#include "engine/mapped_scan.hpp"
#include "engine/zero_scan.hpp"

namespace sluice {

namespace {

// An extent that zero detection breaks into more data runs than this is written from
// the mapping it was scanned in rather than spliced: a splice is two trips through a
// kernel worker, and a filesystem image whose free 4 KiB blocks are scattered breaks
// into tens of thousands of short runs (2 GiB with a quarter of its blocks zero: some
// 98,000), which as buffers go out in chains (PageCacheWriter) or batched sends.
constexpr std::size_t max_slices_per_extent = 4;

// A scanned mapping lent to the pieces written from it. It keeps its scan slot until
// the last of them has been written, so what is mapped stays within the depth.
struct LentMapping {
  LentMapping(MappedRange r, Credits& s) : range(std::move(r)), slots(s) {}
  LentMapping(const LentMapping&) = delete;
  LentMapping& operator=(const LentMapping&) = delete;
  ~LentMapping() { slots.release(); }
  MappedRange range;
  Credits& slots;
};

// Largest zero request: big enough that a sparse terabyte costs few round trips, small
// enough for a 32-bit NBD length.
constexpr std::uint64_t max_zero_request = 1ull << 30;

}  // namespace

CopyLane::CopyLane(executor ex, Source& source, Destination& destination, const CopyOptions& options,
                   bool by_reference, Stripes& stripes, ProgressTally& progress, bool at_home)
    : source_(source),
      destination_(destination),
      traits_(destination.traits()),
      options_(options),
      stripes_(stripes),
      progress_(progress),
      at_home_(at_home),
      pool_(ex, buffers_for(options_.depth, traits_.releases_buffers_when_sent, source.round_trip()),
            options_.request_size),
      write_slots_(ex, options_.depth),
      data_slots_(ex, std::max(options_.depth, traits_.writes_in_flight)),
      scan_slots_(ex, options_.depth),
      items_(ex, options_.depth),
      filled_(ex, options_.depth * 2),
      stages_(ex, [this](const Error&) { stop(); }),
      scan_probe_(options_.mapped_scan_dear_ratio),
      zero_copy_(by_reference) {
  known_zero_ = traits_.known_zero || options_.destination_is_zero;
  wide_data_slots_ = traits_.writes_in_flight > options_.depth;
  // Finding zeros in data pays only where zeros cost less than data.
  detect_zeros_ =
      options_.sparse > 0 && !traits_.ordered && !traits_.discards && (traits_.zero_is_cheap || known_zero_);
}

// Cancellation is the copy's to subscribe to: it stops every lane.
awaitable<Status> CopyLane::run() {
  stages_.spawn(expand());
  stages_.spawn(read_stage());
  stages_.spawn(write_stage());
  Status status = co_await stages_.join();
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
  ExtentAligner aligner(options_.alignment, stripe.end());
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
  const std::uint64_t limit = extent.kind == ExtentKind::data ? options_.request_size : max_zero_request;
  for (std::uint64_t offset = extent.offset; offset < extent.end();) {
    std::uint64_t length = std::min(extent.end() - offset, limit - offset % limit);
    WorkItem item{seq++, Extent{offset, length, extent.kind}, Buffer{}, false, std::nullopt};
    auto [ec] = co_await items_.async_send(asio::error_code{}, std::move(item), use_nothrow);
    if (ec) co_return false;
    offset += length;
  }
  co_return true;
}

// Starts a read for each data item as soon as a buffer is free; zero items pass on.
awaitable<Status> CopyLane::read_stage() {
  // A read's failure is the copy's at once (see record_root_cause).
  TaskGroup reads(co_await asio::this_coro::executor, [this](const Error& e) { record_root_cause(e); });
  std::uint64_t end_seq = 0;
  for (;;) {
    auto [ec, item] = co_await items_.async_receive(use_nothrow);
    if (ec) break;
    if (item.end) {
      end_seq = item.seq;
      break;
    }
    // Zero detection on a source that goes by reference scans it in place, unless
    // that proved dearer than reading it: then the rest is read into buffers.
    const bool scan_in_place = zero_copy_ && detect_zeros_ && !scan_probe_.mapping_is_dear();
    const bool by_reference = zero_copy_ && (!detect_zeros_ || scan_in_place);
    if (item.extent.kind == ExtentKind::data && scan_in_place) {
      // Scans overlap, as buffered reads do: mapping a range makes the kernel read
      // it in, and one at a time a cold source would be read at queue depth 1.
      if (!co_await scan_slots_.acquire()) break;
      reads.spawn(scan_by_reference(std::move(item)));
      continue;
    }
    if (item.extent.kind != ExtentKind::data || by_reference) {
      if (by_reference) mark_by_reference(item);
      if (!co_await pass_on(std::move(item))) break;
      continue;
    }
    auto buffer = co_await pool_.acquire();
    if (!buffer) {
      // Closed by stop() is a sibling's failure, reported by that sibling; anything
      // else (memory) is this stage's own and must not pass for the end of the data.
      if (!stopped_) reads.fail(buffer.error());
      break;
    }
    reads.spawn(read_one(std::move(item), std::move(*buffer)));
  }
  Status status = co_await reads.join();
  if (!status) co_return status;
  if (stopped_) co_return cancelled();
  WorkItem end{end_seq, {}, Buffer{}, true, std::nullopt};
  if (!co_await pass_on(std::move(end))) co_return cancelled();
  co_return Status{};
}

// The write stage's slots bound what is in flight; there is no buffer to hold.
void CopyLane::mark_by_reference(WorkItem& item) {
  if (item.extent.kind != ExtentKind::data) return;
  item.file = source_.file_slice(item.extent.offset, item.extent.length);
  ++stats_.reads;
  stats_.bytes_read += item.extent.length;
}

// Zero detection on a mapping of the source; data runs go on by reference. Holds a
// scan slot, taken by the caller.
awaitable<Status> CopyLane::scan_by_reference(WorkItem item) {
  bool slot_lent = false;
  Status status = co_await scan_and_pass_on(std::move(item), slot_lent);
  if (!slot_lent) scan_slots_.release();
  co_return status;
}

awaitable<Status> CopyLane::scan_and_pass_on(WorkItem item, bool& slot_lent) {
  const Extent extent = item.extent;
  const auto slice = source_.file_slice(extent.offset, extent.length);
  auto range = co_await MappedRange::map(FileRing::of(co_await asio::this_coro::executor), slice->fd, slice->offset,
                                         static_cast<std::size_t>(extent.length));
  if (!range) co_return tl::unexpected(range.error());
  auto runs = measure_scans() ? measured_zero_runs(*range, extent) : range->zero_runs(extent.offset, options_.sparse);
  if (!runs) co_return tl::unexpected(runs.error());
  ++stats_.reads;
  stats_.bytes_read += extent.length;
  const auto data_runs =
      static_cast<std::size_t>(std::count_if(runs->begin(), runs->end(), [](const Run& r) { return !r.zero; }));
  std::shared_ptr<const LentMapping> lender;
  if (data_runs > max_slices_per_extent) {
    lender = std::make_shared<const LentMapping>(std::move(*range), scan_slots_);
    slot_lent = true;
  }
  for (const Run& run : *runs) {
    WorkItem piece{item.seq, Extent{extent.offset + run.offset, run.length, run.zero ? ExtentKind::zero : ExtentKind::data},
                   Buffer{}, false, std::nullopt};
    if (!run.zero && lender)
      piece.data = Buffer::borrow(lender->range.bytes().subspan(run.offset, run.length), lender);
    else if (!run.zero)
      piece.file = FileSlice{slice->fd, slice->offset + run.offset, run.length};
    if (!co_await pass_on(std::move(piece))) co_return cancelled();
  }
  co_return Status{};
}

// Only where the copy may give way (ZeroCopy::always keeps scanning in place).
bool CopyLane::measure_scans() const { return options_.zero_copy == ZeroCopy::automatic && scan_probe_.measuring(); }

Result<std::vector<Run>> CopyLane::measured_zero_runs(const MappedRange& range, const Extent& extent) {
  ScanCost cost;
  auto runs = range.zero_runs_measured(extent.offset, options_.sparse,
                                       scan_probe_.scratch(static_cast<std::size_t>(extent.length)), cost);
  if (runs) scan_probe_.add(cost);
  if (scan_probe_.mapping_is_dear())
    stats_.mapped_scan_gave_way =
        TransferStats::ScanGaveWay{scan_probe_.median().touch_ns_per_page, scan_probe_.median().copy_ns_per_page};
  return runs;
}

awaitable<Status> CopyLane::read_one(WorkItem item, Buffer buffer) {
  buffer.truncate(item.extent.length);
  ++stats_.reads;
  Status status = co_await source_.read(item.extent.offset, buffer.writable());
  if (!status) co_return status;
  stats_.bytes_read += item.extent.length;
  if (!detect_zeros_) {
    item.data = std::move(buffer);
    if (!co_await pass_on(std::move(item))) co_return cancelled();
    co_return Status{};
  }
  // Each data run keeps a share of the block; a run after a zero run may put its
  // header into those zeros, which nobody sends.
  auto runs = scan_zero_runs(buffer.bytes(), item.extent.offset, options_.sparse);
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
    if (!traits_.ordered) {
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
  if (item.extent.kind == ExtentKind::data || !known_zero_ || options_.allocated) return false;
  stats_.bytes_skipped += item.extent.length;
  completed(item.extent.length);
  return true;
}

Credits& CopyLane::slots_for(const WorkItem& item) {
  return wide_data_slots_ && item.extent.kind == ExtentKind::data ? data_slots_ : write_slots_;
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

// A stage failed: wake everything that waits so every stage returns.
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
  scan_slots_.close();
  source_.abort();
  destination_.abort();
}

}  // namespace sluice
