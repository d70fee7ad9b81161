#include "engine/copier.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "engine/buffer_pool.hpp"
#include "engine/credits.hpp"
#include "engine/extent_aligner.hpp"
#include "engine/mapped_scan.hpp"
#include "engine/mapped_scan_probe.hpp"
#include "engine/task_group.hpp"
#include "engine/zero_scan.hpp"

namespace sluice {

namespace {

using clock = std::chrono::steady_clock;

// Largest zero request: big enough that a sparse terabyte costs few round trips, small
// enough for a 32-bit NBD length.
constexpr std::uint64_t max_zero_request = 1ull << 30;

struct WorkItem {
  std::uint64_t seq = 0;  // position in offset order; the ordered writer sorts by it
  Extent extent;
  Buffer data;  // the payload, once a data item has been read
  bool end = false;
  std::optional<FileSlice> file;  // instead of `data`, when zero-copy: where the payload lies
};

using ItemChannel = asio::experimental::channel<void(asio::error_code, WorkItem)>;

// By reference where both ends allow it (and, unless asked for always, where the
// destination says it pays); zero detection then scans a mapping of the source
// instead of a buffer.
bool payload_by_reference(const CopyOptions& options, Source& source, Destination& destination) {
  const bool wanted = options.zero_copy == ZeroCopy::always      ? destination.takes_file_slices()
                      : options.zero_copy == ZeroCopy::automatic ? destination.file_slices_pay()
                                                                 : false;
  return wanted && source.file_slice(0, 0).has_value();
}

class Copier {
 public:
  // `round_trip`: the farther end's, which options.depth was resolved for (reported in
  // stats); `by_reference`: payload_by_reference's answer, which options.request_size
  // was chosen by.
  Copier(executor ex, Source& source, Destination& destination, CopyOptions options,
         std::chrono::microseconds round_trip, bool by_reference)
      : source_(source),
        destination_(destination),
        traits_(destination.traits()),
        options_(std::move(options)),
        pool_(ex, options_.depth, options_.request_size),
        write_slots_(ex, options_.depth),
        scan_slots_(ex, options_.depth),
        items_(ex, options_.depth),
        filled_(ex, options_.depth * 2),
        stages_(ex, [this](const Error&) { stop(); }),
        scan_probe_(options_.mapped_scan_dear_ratio),
        zero_copy_(by_reference) {
    known_zero_ = traits_.known_zero || options_.destination_is_zero;
    // Finding zeros in data pays only where zeros cost less than data.
    detect_zeros_ = options_.sparse > 0 && !traits_.ordered &&
                    (traits_.zero_is_cheap || known_zero_);
    stats_.size = source_.size();
    stats_.depth = options_.depth;
    stats_.request_size = options_.request_size;
    stats_.round_trip_us = static_cast<std::uint64_t>(round_trip.count());
  }

  awaitable<Result<TransferStats>> run() {
    started_ = clock::now();
    reported_at_ = started_;
    // Held through finish(): a cancelled flush fails as the destination is aborted.
    Cancellation::Subscription cancelled;
    if (options_.cancellation) {
      cancelled = options_.cancellation->on_request(co_await asio::this_coro::executor, [this] {
        stages_.fail(cancelled_error());
        stop();
      });
    }
    stages_.spawn(expand());
    stages_.spawn(read_stage());
    stages_.spawn(write_stage());
    Status status = co_await stages_.join();
    // Every stage ended cleanly, so every byte must have completed: a shortfall is a
    // bug that would otherwise be a silent short copy with exit status 0.
    if (status && done_ < stats_.size)
      status = fail(std::errc::io_error, "the copy stopped after " + std::to_string(done_) + " of " +
                                             std::to_string(stats_.size) + " bytes with no error reported");
    if (status) status = co_await finish();
    if (status && stopped_) status = tl::unexpected(cancelled_error());  // cancelled during finish()
    stats_.seconds = std::chrono::duration<double>(clock::now() - started_).count();
    stats_.peak_buffers = pool_.high_water();
    source_.add_stats(stats_);
    destination_.add_stats(stats_);
    if (!status) co_return tl::unexpected(status.error());
    co_return stats_;
  }

 private:
  // Turns the source's extent map into work items: aligned for the destination, no
  // larger than one request (data) or max_zero_request (zeros), split on multiples of
  // the request size.
  awaitable<Status> expand() {
    const std::uint64_t size = source_.size();
    ExtentAligner aligner(options_.alignment, size);
    std::uint64_t offset = 0;
    std::uint64_t seq = 0;
    while (offset < size) {
      auto extents = co_await source_.extents(offset, std::min(options_.extent_window, size - offset));
      if (!extents) co_return tl::unexpected(extents.error());
      if (extents->empty())
        co_return fail_at("reading the extent map (no extents returned)", offset,
                          std::make_error_code(std::errc::protocol_error));
      for (const Extent& extent : *extents) {
        if (offset >= size) break;
        if (extent.offset != offset || extent.length == 0)
          co_return fail_at("reading the extent map (extents not contiguous)", offset,
                            std::make_error_code(std::errc::protocol_error));
        Extent clamped{offset, std::min(extent.end(), size) - offset, extent.kind};
        count_extent(clamped);
        offset = clamped.end();
        for (const Extent& aligned : aligner.push(clamped))
          if (!co_await emit(aligned, seq)) co_return cancelled();
      }
    }
    for (const Extent& aligned : aligner.finish())
      if (!co_await emit(aligned, seq)) co_return cancelled();
    // Named, not a temporary in the co_await expression (g++ 12 coroutine lifetime bug).
    WorkItem end{seq, {}, Buffer{}, true, std::nullopt};
    auto [ec] = co_await items_.async_send(asio::error_code{}, std::move(end), use_nothrow);
    if (ec) co_return cancelled();
    co_return Status{};
  }

  awaitable<bool> emit(const Extent& extent, std::uint64_t& seq) {
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
  awaitable<Status> read_stage() {
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
  void mark_by_reference(WorkItem& item) {
    if (item.extent.kind != ExtentKind::data) return;
    item.file = source_.file_slice(item.extent.offset, item.extent.length);
    ++stats_.reads;
    stats_.bytes_read += item.extent.length;
  }

  // Zero detection on a mapping of the source; data runs go on by reference. Holds a
  // scan slot, taken by the caller.
  awaitable<Status> scan_by_reference(WorkItem item) {
    Status status = co_await scan_and_pass_on(std::move(item));
    scan_slots_.release();
    co_return status;
  }

  awaitable<Status> scan_and_pass_on(WorkItem item) {
    const Extent extent = item.extent;
    const auto slice = source_.file_slice(extent.offset, extent.length);
    auto range = co_await MappedRange::map(FileRing::of(co_await asio::this_coro::executor), slice->fd, slice->offset,
                                           static_cast<std::size_t>(extent.length));
    if (!range) co_return tl::unexpected(range.error());
    auto runs = measure_scans() ? measured_zero_runs(*range, extent) : range->zero_runs(extent.offset, options_.sparse);
    if (!runs) co_return tl::unexpected(runs.error());
    ++stats_.reads;
    stats_.bytes_read += extent.length;
    for (const Run& run : *runs) {
      WorkItem piece{item.seq, Extent{extent.offset + run.offset, run.length, run.zero ? ExtentKind::zero : ExtentKind::data},
                     Buffer{}, false, std::nullopt};
      if (!run.zero) piece.file = FileSlice{slice->fd, slice->offset + run.offset, run.length};
      if (!co_await pass_on(std::move(piece))) co_return cancelled();
    }
    co_return Status{};
  }

  // Only where the copy may give way (ZeroCopy::always keeps scanning in place).
  bool measure_scans() const { return options_.zero_copy == ZeroCopy::automatic && scan_probe_.measuring(); }

  Result<std::vector<Run>> measured_zero_runs(const MappedRange& range, const Extent& extent) {
    ScanCost cost;
    auto runs = range.zero_runs_measured(extent.offset, options_.sparse,
                                         scan_probe_.scratch(static_cast<std::size_t>(extent.length)), cost);
    if (runs) scan_probe_.add(cost);
    if (scan_probe_.mapping_is_dear())
      stats_.mapped_scan_gave_way =
          TransferStats::ScanGaveWay{scan_probe_.median().touch_ns_per_page, scan_probe_.median().copy_ns_per_page};
    return runs;
  }

  awaitable<Status> read_one(WorkItem item, Buffer buffer) {
    buffer.truncate(item.extent.length);
    ++stats_.reads;
    Status status = co_await source_.read(item.extent.offset, buffer.data());
    if (!status) co_return status;
    stats_.bytes_read += item.extent.length;
    if (!detect_zeros_) {
      item.data = std::move(buffer);
      if (!co_await pass_on(std::move(item))) co_return cancelled();
      co_return Status{};
    }
    // Each data run keeps a share of the block; a run after a zero run may put its
    // header into those zeros, which nobody sends.
    auto runs = scan_zero_runs(buffer.data(), item.extent.offset, options_.sparse);
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

  awaitable<bool> pass_on(WorkItem item) {
    auto [ec] = co_await filled_.async_send(asio::error_code{}, std::move(item), use_nothrow);
    co_return !ec;
  }

  awaitable<Status> write_stage() {
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
        if (!co_await write_slots_.acquire()) break;
        writes.spawn(write_one(std::move(item), true));
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
        if (Status s = co_await write_one(std::move(next), false); !s) {
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

  bool skip_if_zero(const WorkItem& item) {
    if (item.extent.kind == ExtentKind::data || !known_zero_ || options_.allocated) return false;
    stats_.bytes_skipped += item.extent.length;
    completed(item.extent.length);
    return true;
  }

  awaitable<Status> write_one(WorkItem item, bool holds_slot) {
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
    if (holds_slot) write_slots_.release();
    if (status) completed(extent.length);
    co_return status;
  }

  awaitable<Status> finish() {
    if (options_.flush) {
      if (Status s = co_await destination_.flush(); !s) co_return s;
    }
    co_return co_await destination_.finish();
  }

  void completed(std::uint64_t bytes) {
    done_ += bytes;
    if (!options_.progress) return;
    // Bounded however small the pieces are (zero detection completes runs of 4 KiB): a
    // toolstack may forward every call as a message.
    const auto now = clock::now();
    if (done_ != stats_.size && done_ - reported_ < stats_.size / 100 &&
        now - reported_at_ < CopyOptions::progress_interval)
      return;
    reported_ = done_;
    reported_at_ = now;
    // The user's code, called from inside a stage: what it throws must fail the copy
    // like any stage's error, not unwind the stage past the writes it has in flight.
    try {
      options_.progress(ProgressUpdate{done_, stats_.size, std::chrono::duration<double>(now - started_).count()});
    } catch (const std::exception& e) {
      stages_.fail(Error{std::make_error_code(std::errc::interrupted),
                         std::string("the progress callback failed: ") + e.what()});
      stop();
    } catch (...) {
      stages_.fail(Error{std::make_error_code(std::errc::interrupted), "the progress callback failed"});
      stop();
    }
  }

  // A map is asked for window by window, and an extent that spans windows comes back
  // in pieces: it is one extent.
  void count_extent(const Extent& extent) {
    const bool continues = extent.offset == counted_end_ && extent.kind == counted_kind_ && counted_end_ != 0;
    counted_end_ = extent.end();
    counted_kind_ = extent.kind;
    if (continues) return;
    switch (extent.kind) {
      case ExtentKind::data: ++stats_.data_extents; break;
      case ExtentKind::zero: ++stats_.zero_extents; break;
      case ExtentKind::hole: ++stats_.hole_extents; break;
    }
  }

  // The first failed read or write is the copy's error, recorded in stages_ before
  // stop() aborts both ends. Left in its stage's own group until that stage returned,
  // it could be overtaken by an error the abort caused: a server that dies when its
  // connection is cut (nbdkit 1.32 asserts in raw_send_socket) fails the other
  // stage's reads with "closed the connection", and that became the copy's error.
  void record_root_cause(const Error& error) { stages_.fail(error); }

  // A stage failed: wake everything that waits so every stage returns.
  void stop() {
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
    scan_slots_.close();
    source_.abort();
    destination_.abort();
  }

  Source& source_;
  Destination& destination_;
  DestinationTraits traits_;
  CopyOptions options_;
  BufferPool pool_;
  Credits write_slots_;
  Credits scan_slots_;  // mapped scans in flight (zero detection by reference)
  ItemChannel items_;
  ItemChannel filled_;
  TaskGroup stages_;
  MappedScanProbe scan_probe_;
  TransferStats stats_;
  bool known_zero_ = false;
  bool detect_zeros_ = false;
  bool zero_copy_ = false;
  bool stopped_ = false;
  std::uint64_t done_ = 0;
  std::uint64_t reported_ = 0;  // done_ at the last progress call
  clock::time_point started_;
  clock::time_point reported_at_;
  std::uint64_t counted_end_ = 0;  // the end of the last extent counted, and its kind
  ExtentKind counted_kind_ = ExtentKind::data;
};

}  // namespace

awaitable<Result<TransferStats>> copy(Source& source, Destination& destination, CopyOptions options) {
  const bool by_reference = payload_by_reference(options, source, destination);
  options.request_size = request_size_for(options, by_reference);
  auto settled = settle_sizes(options, source.block_sizes(), destination.traits().block_sizes);
  if (!settled) co_return tl::unexpected(settled.error());
  const std::chrono::microseconds round_trip = std::max(source.round_trip(), destination.traits().round_trip);
  options.depth = depth_for(options, round_trip);
  Copier copier(co_await asio::this_coro::executor, source, destination, std::move(options), round_trip,
                by_reference);
  co_return co_await copier.run();
}

}  // namespace sluice
