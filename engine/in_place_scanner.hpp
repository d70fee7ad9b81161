// Zero detection on a source whose payload goes by reference (CopyPlan's
// ZeroScan::in_place and in_place_until_dear): each data item's range of the source
// file is mapped, scanned where it lies, and its data runs go on as file slices, or,
// where an extent breaks into many short runs, as pieces of the mapping lent to them.
// A copy lane owns one; its read stage hands it data items.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "engine/asio.hpp"
#include "engine/copy_plan.hpp"
#include "engine/credits.hpp"
#include "engine/error.hpp"
#include "engine/mapped_scan.hpp"
#include "engine/mapped_scan_probe.hpp"
#include "engine/source.hpp"
#include "engine/stats.hpp"
#include "engine/work_item.hpp"

namespace sluice {

class InPlaceScanner {
 public:
  // Hands a piece on down the lane; false once the lane has stopped.
  using PassOn = std::function<awaitable<bool>(WorkItem)>;

  // `dear_ratio`: CopyOptions::mapped_scan_dear_ratio. Scans count their reads into
  // `stats`, and, if scanning in place gives way, why.
  InPlaceScanner(executor ex, Source& source, const CopyPlan& plan, double dear_ratio, TransferStats& stats,
                 PassOn pass_on);

  // Whether the lane's data items are scanned here. False once mapping proved dearer
  // than copying (ZeroScan::in_place_until_dear): the rest is read into buffers.
  bool in_use() const { return !probe_.mapping_is_dear(); }

  // A scan slot: scans overlap, as buffered reads do (mapping a range makes the kernel
  // read it in, and one at a time a cold source would be read at queue depth 1), up to
  // the plan's scan_slots. Fails once close() has been called.
  awaitable<Status> acquire() { return slots_.acquire(); }

  // Scans the data item's range and passes its runs on; holds the slot acquire() took.
  awaitable<Status> scan(WorkItem item);

  // Wakes whatever waits for a slot (the lane stopped).
  void close() { slots_.close(); }

 private:
  // `slot_lent`: set once the scan slot went with a mapping lent to the pieces.
  awaitable<Status> scan_and_pass_on(WorkItem item, bool& slot_lent);
  Result<std::vector<Run>> measured_zero_runs(const MappedRange& range, const Extent& extent);

  Source& source_;
  std::size_t sparse_;
  bool may_give_way_;  // ZeroScan::in_place_until_dear: the first scans are measured
  Credits slots_;
  MappedScanProbe probe_;
  TransferStats& stats_;
  PassOn pass_on_;
};

}  // namespace sluice
