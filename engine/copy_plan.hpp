// CopyPlan: every decision about one copy, made once, before anything moves, from what
// the two ends say about themselves (SourceTraits, DestinationTraits) and the user's
// CopyOptions. The copier and its lanes only carry it out; `sluice copy --stats` prints
// it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/error.hpp"

namespace sluice {

struct BlockSizes;
struct CopyOptions;
struct DestinationTraits;
struct SourceTraits;

// How zeros in the source's data are found, if at all.
enum class ZeroScan : std::uint8_t {
  none,        // not looked for: data goes on as read (or by reference)
  in_buffers,  // each buffer read is scanned
  // The source is mapped and scanned where it lies, and its data runs go by reference
  // (engine/in_place_scanner.hpp).
  in_place,
  // In place, the first scans measured; into buffers from then on if mapping a page
  // proves dearer than copying it (MappedScanProbe).
  in_place_until_dear,
};

// "none", "in_buffers", "in_place", "in_place_until_dear".
std::string_view to_string(ZeroScan scan);

struct CopyPlan {
  std::size_t request_size = 0;  // bytes per data request, as both ends accept
  std::uint64_t alignment = 1;   // every request lies on it (both ends' minimum block size)
  std::size_t depth = 0;         // requests in flight, all lanes together
  std::size_t lanes = 1;         // lanes copying stripes side by side (engine/copier.hpp)
  std::uint64_t stripe_size = 0;  // what a lane claims at a time; 0: one lane, no stripes
  // Each lane's share: its requests in flight (write slots), the buffers it reads into,
  // the data writes it may have in flight where the destination takes more than its
  // share (0: data writes take write slots too), and the mapped scans in flight.
  std::size_t lane_depth = 0;
  std::size_t buffers = 0;
  std::size_t data_slots = 0;
  std::size_t scan_slots = 0;
  std::chrono::microseconds round_trip{0};  // the farther end's; zero if both are local
  bool by_reference = false;  // file data goes to the destination as file slices
  ZeroScan zero_scan = ZeroScan::none;
  std::size_t sparse = 0;  // zero-detection granularity; 0 with ZeroScan::none
  // The destination already reads as zeros and may keep holes: zero ranges need no
  // request at all.
  bool skip_zero_ranges = false;
  bool ordered = false;  // one write at a time, in offset order (a byte stream)
  friend bool operator==(const CopyPlan&, const CopyPlan&) = default;
};

// The plan for copying a source of `image_size` bytes. `cpus`: the CPUs automatic lanes
// may use; `lane_loops`: the most lanes the destination can run on its own loops (0:
// any number, on loops of the copier's own). Fails when no request size fits both ends.
Result<CopyPlan> plan_copy(const CopyOptions& options, const SourceTraits& source,
                           const DestinationTraits& destination, std::uint64_t image_size, std::size_t cpus,
                           std::size_t lane_loops);

// The steps plan_copy takes, in its order.

// The request size a copy starts from: `asked` when set; otherwise
// CopyOptions::spliced_request_size when the payload goes by reference, else
// CopyOptions::buffered_request_size.
std::size_t request_size_for(std::size_t asked, bool by_reference);

struct SettledSizes {
  std::size_t request_size = 0;
  std::uint64_t alignment = 1;
  std::size_t sparse = 0;  // no finer than what the destination can address
};

// Reconciles the request size, alignment and zero-detection granularity with the
// block sizes both endpoints impose; fails when they cannot be met together.
Result<SettledSizes> settle_sizes(std::size_t request_size, std::size_t sparse, const BlockSizes& source,
                                  const BlockSizes& destination);

// The depth a copy runs at: `asked` when set; otherwise CopyOptions::default_depth,
// or, when one end is `round_trip` away, enough requests of `request_size` to cover
// two round trips at CopyOptions::latency_link_bytes_per_second (a request's reply is
// a round trip behind it, and queueing in the path adds about as much again), at most
// CopyOptions::latency_in_flight_limit bytes. Near ends keep default_depth, which was
// measured as enough for them (docs/benchmarks.md) and spares a destination's disk a
// deeper queue: on a long link the extra requests are on the wire, not at the disk.
std::size_t depth_for(std::size_t asked, std::size_t request_size, std::chrono::microseconds round_trip);

// The buffers a lane of `depth` requests reads into. Where the destination holds a
// buffer until its write completes, the depth: the buffers are what bounds the writes.
// Where it lets go once the bytes are sent and the source is local (no round trip),
// CopyOptions::local_read_ahead_buffers: more would only fill while every write slot
// waits for an answer, and each payload then went out several reads after it was
// read, cold in the caches (on loopback to nbdkit, 1.2-1.3x slower at more CPU on both
// ends: docs/benchmarks.md, "Read ahead"). A local source needs no deep read queue:
// the page cache answers at once, and the kernel reads a cold file ahead of sequential
// reads. A source a round trip away keeps the depth, which covers its reads' round
// trips.
std::size_t buffers_for(std::size_t depth, bool releases_buffers_when_sent,
                        std::chrono::microseconds source_round_trip);

// The stripe a lane claims at a time: `stripe_size` rounded up to whole requests and to
// the alignment, so every stripe but the last ends on both.
std::uint64_t stripe_size_for(std::uint64_t stripe_size, std::size_t request_size, std::uint64_t alignment);

// The lanes a copy of `image_size` bytes could run in, if both ends allow lanes:
// `asked` when set, else one per CPU (`cpus`) up to CopyOptions::max_automatic_lanes;
// never more than `depth` (each lane needs a request in flight) or the stripes of
// `stripe` bytes. One for an image of a single stripe: a thread would cost more than it
// saves.
std::size_t lanes_for(std::size_t asked, std::size_t depth, std::uint64_t stripe, std::uint64_t image_size,
                      std::size_t cpus);

}  // namespace sluice
