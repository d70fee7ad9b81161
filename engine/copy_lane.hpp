// CopyLane: the pipeline of one lane of a copy, on one event loop:
//
//   expander --items--> reader --filled--> writer --> Destination
//   (extents of the     (Source reads,      (writes / zeros,
//    stripes it claims)  zero detection)     up to depth in flight)
//
// Each stage is a coroutine; bounded channels couple them. Buffers from the lane's own
// pool are the credit: the reader needs one to start a read and the writer's request
// drops it when the destination is done, so the pool size bounds what is in flight.
// Write slots bound the writes themselves; they matter where the destination lets go
// of a buffer before its write completes, and there the pool bounds only how far the
// reads run ahead (buffers_for). How many of each, and which way the reader takes for a
// data item (into a buffer, by reference, or scanned in place: InPlaceScanner), is the
// copy's plan (engine/copy_plan.hpp); the lane only carries it out.
//
// A copy runs one lane on the caller's loop, or several side by side (engine/copier.hpp
// says when), each on a loop of its own, sharing nothing but the two endpoints, the
// stripes they claim and the progress tally.
#pragma once

#include <chrono>
#include <cstdint>

#include "engine/asio.hpp"
#include "engine/buffer_pool.hpp"
#include "engine/copy_options.hpp"
#include "engine/copy_plan.hpp"
#include "engine/credits.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/grace_period.hpp"
#include "engine/in_place_scanner.hpp"
#include "engine/progress_tally.hpp"
#include "engine/source.hpp"
#include "engine/stats.hpp"
#include "engine/stripes.hpp"
#include "engine/task_group.hpp"
#include "engine/work_item.hpp"

namespace sluice {

class CopyLane {
 public:
  // `plan`: the copy's (the lane takes its share); `options`: the copy's, for what the
  // plan leaves to them (the extent window, --allocated, the mapped-scan probe);
  // `at_home`: this lane runs on the copy's own loop, where progress calls are made.
  CopyLane(executor ex, Source& source, Destination& destination, const CopyPlan& plan, const CopyOptions& options,
           Stripes& stripes, ProgressTally& progress, bool at_home);

  // Copies the stripes this lane claims until none is left; on the lane's loop.
  awaitable<Status> run();

  // Stops issuing and wakes every stage, so each returns once its requests in flight
  // have completed; after options.stop_grace, both ends are aborted to cut off the
  // ones that have not. On the lane's loop.
  void stop();

  // What this lane read, wrote and counted; size and timing are the copy's to fill.
  const TransferStats& stats() const { return stats_; }

 private:
  awaitable<Status> expand();
  awaitable<Status> expand_stripe(const Stripe& stripe, std::uint64_t& seq);
  awaitable<bool> emit(const Extent& extent, std::uint64_t& seq);
  awaitable<Status> read_stage();
  // The way the read stage takes for an item.
  enum class ReadWay : std::uint8_t { pass_on, by_reference, scan_in_place, into_buffer };
  ReadWay read_way(const WorkItem& item) const;
  void mark_by_reference(WorkItem& item);
  awaitable<Status> read_one(WorkItem item, Buffer buffer);
  awaitable<bool> pass_on(WorkItem item);
  awaitable<Status> write_stage();
  bool skip_if_zero(const WorkItem& item);
  Credits& slots_for(const WorkItem& item);
  awaitable<Status> write_one(WorkItem item, Credits* slot);
  void completed(std::uint64_t bytes);
  void count_extent(const Extent& extent);
  // The first failed read or write is the copy's error, recorded in stages_ at once.
  // Left in its stage's own group until that stage returned, it could be overtaken by
  // an error the stop caused: a server that dies when its connection is cut (nbdkit
  // 1.32 asserts in raw_send_socket) fails the other stage's reads with "closed the
  // connection", and that became the copy's error.
  void record_root_cause(const Error& error) { stages_.fail(error); }

  Source& source_;
  Destination& destination_;
  CopyPlan plan_;
  CopyOptions options_;
  Stripes& stripes_;
  ProgressTally& progress_;
  bool at_home_;
  BufferPool pool_;
  Credits write_slots_;  // writes and zeros in flight: the lane's depth
  // Data writes in flight, where the destination takes more of them than the depth
  // (DestinationTraits::writes_in_flight); zeros keep to write_slots_.
  Credits data_slots_;
  ItemChannel items_;
  ItemChannel filled_;
  TaskGroup stages_;
  GracePeriod grace_;  // started by stop(): then aborts both ends
  TransferStats stats_;
  InPlaceScanner scanner_;
  bool stopped_ = false;
  // The extent last counted in the current stripe (its end and kind), and the kind of
  // that stripe's first extent.
  std::uint64_t counted_end_ = 0;
  ExtentKind counted_kind_ = ExtentKind::data;
  bool counted_any_ = false;
  ExtentKind stripe_first_kind_ = ExtentKind::data;
};

}  // namespace sluice
