#include "engine/in_place_scanner.hpp"

#include <algorithm>
#include <memory>

#include "engine/uring/file_ring.hpp"

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

}  // namespace

InPlaceScanner::InPlaceScanner(executor ex, Source& source, const CopyPlan& plan, double dear_ratio,
                               TransferStats& stats, PassOn pass_on)
    : source_(source),
      sparse_(plan.sparse),
      may_give_way_(plan.zero_scan == ZeroScan::in_place_until_dear),
      slots_(ex, plan.scan_slots),
      probe_(dear_ratio),
      stats_(stats),
      pass_on_(std::move(pass_on)) {}

awaitable<Status> InPlaceScanner::scan(WorkItem item) {
  bool slot_lent = false;
  Status status = co_await scan_and_pass_on(std::move(item), slot_lent);
  if (!slot_lent) slots_.release();
  co_return status;
}

awaitable<Status> InPlaceScanner::scan_and_pass_on(WorkItem item, bool& slot_lent) {
  const Extent extent = item.extent;
  const auto slice = source_.file_slice(extent.offset, extent.length);
  auto range = co_await MappedRange::map(FileRing::of(co_await asio::this_coro::executor), slice->fd, slice->offset,
                                         static_cast<std::size_t>(extent.length));
  if (!range) co_return tl::unexpected(range.error());
  // Only where the copy may give way (ZeroCopy::always keeps scanning in place).
  const bool measure = may_give_way_ && probe_.measuring();
  auto runs = measure ? measured_zero_runs(*range, extent) : range->zero_runs(extent.offset, sparse_);
  if (!runs) co_return tl::unexpected(runs.error());
  ++stats_.reads;
  stats_.bytes_read += extent.length;
  const auto data_runs =
      static_cast<std::size_t>(std::count_if(runs->begin(), runs->end(), [](const Run& r) { return !r.zero; }));
  std::shared_ptr<const LentMapping> lender;
  if (data_runs > max_slices_per_extent) {
    lender = std::make_shared<const LentMapping>(std::move(*range), slots_);
    slot_lent = true;
  }
  for (const Run& run : *runs) {
    WorkItem piece{item.seq, Extent{extent.offset + run.offset, run.length, run.zero ? ExtentKind::zero : ExtentKind::data},
                   Buffer{}, false, std::nullopt};
    if (!run.zero && lender)
      piece.data = Buffer::borrow(lender->range.bytes().subspan(run.offset, run.length), lender);
    else if (!run.zero)
      piece.file = FileSlice{slice->fd, slice->offset + run.offset, run.length};
    if (!co_await pass_on_(std::move(piece))) co_return cancelled();
  }
  co_return Status{};
}

Result<std::vector<Run>> InPlaceScanner::measured_zero_runs(const MappedRange& range, const Extent& extent) {
  ScanCost cost;
  auto runs = range.zero_runs_measured(extent.offset, sparse_, probe_.scratch(static_cast<std::size_t>(extent.length)),
                                       cost);
  if (runs) probe_.add(cost);
  if (probe_.mapping_is_dear())
    stats_.mapped_scan_gave_way =
        TransferStats::ScanGaveWay{probe_.median().touch_ns_per_page, probe_.median().copy_ns_per_page};
  return runs;
}

}  // namespace sluice
