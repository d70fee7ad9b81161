// Knobs of one copy. Defaults are the measured ones (docs/benchmarks.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "engine/error.hpp"
#include "engine/block_sizes.hpp"
#include "engine/cancellation.hpp"

namespace sluice {

struct ProgressUpdate {
  std::uint64_t done = 0;   // bytes whose write (or zeroing) has completed
  std::uint64_t total = 0;  // the source's size
  double seconds = 0;
};

using ProgressCallback = std::function<void(const ProgressUpdate&)>;

// Whether file data goes to the destination by reference (splice) instead of through a
// buffer. `automatic` splices where the destination says it pays (measured per kind of
// destination); `always` wherever it can (for comparisons); `never` not at all.
enum class ZeroCopy { automatic, always, never };

struct CopyOptions {
  static constexpr std::size_t default_depth = 8;
  // The automatic depth keeps two round trips of a link this fast in flight, when that
  // is more than default_depth requests, up to latency_in_flight_limit bytes.
  static constexpr double latency_link_bytes_per_second = 1.25e9;  // 10 Gbit/s
  static constexpr std::size_t latency_in_flight_limit = 64u << 20;
  // Bytes per data request, unless set: smaller where this process touches the payload
  // (reads it into a buffer, scans it, copies or encrypts it), so the default depth's
  // requests (8 MiB in all) stay in the last-level cache between those passes; 2 MiB
  // requests (16 MiB in flight) made such copies 15-25% slower on an AMD EPYC host and
  // no faster on an Intel Xeon one. Where the payload goes by reference (spliced), the
  // CPU never reads it and per-request costs dominate: 2 MiB (1 MiB was 10-13% slower
  // there). docs/benchmarks.md has the runs.
  static constexpr std::size_t buffered_request_size = 1u << 20;
  static constexpr std::size_t spliced_request_size = 2u << 20;
  static constexpr std::size_t default_sparse = 4096;
  // Automatic lanes: one per CPU, at most this many (engine/copier.hpp says when a copy
  // runs in lanes).
  static constexpr std::size_t max_automatic_lanes = 4;
  static constexpr std::uint64_t default_stripe_size = 64ull << 20;
  // Buffers a lane reads ahead into, from a local source, where the destination lets
  // go of them once sent (buffers_for).
  static constexpr std::size_t local_read_ahead_buffers = 2;

  // Requests in flight; also the number of buffers, so memory is depth x request_size.
  // 0: automatic (depth_for): default_depth, more when an end is a long round trip away.
  std::size_t depth = 0;
  // 0: automatic, buffered_request_size or spliced_request_size (request_size_for).
  std::size_t request_size = 0;
  // Lanes copying stripes of the image side by side, each on an event loop and thread
  // of its own, where both ends allow it; they share `depth` between them. 0:
  // automatic (lanes_for); 1: one lane, on the caller's loop.
  std::size_t lanes = 0;
  // The share of the image a lane claims at a time, rounded up to whole requests
  // (stripe_size_for): large enough that claiming costs nothing, small enough that the
  // lanes finish close together.
  std::uint64_t stripe_size = default_stripe_size;
  // Zero-detection granularity for data read from the source; 0 turns it off.
  std::size_t sparse = default_sparse;
  // The destination already reads as zeros (--prezeroed / --destination-is-zero).
  bool destination_is_zero = false;
  // Zeroed ranges must stay allocated (NBD's NO_HOLE).
  bool allocated = false;
  bool flush = true;
  // Let data go from a file source to a splicing destination by reference (no copy
  // through this process) (--zero-copy, --no-zero-copy).
  ZeroCopy zero_copy = ZeroCopy::automatic;
  // With `automatic`, zero detection scans a source that goes by reference in place
  // until the first scans show that mapping a page costs at least this many times
  // copying it, and reads into buffers from then on (MappedScanProbe). 0 gives way
  // after the first scans whatever they cost (tests).
  double mapped_scan_dear_ratio = 1.0;
  // Boundary every request lies on (both ends' minimum block size); set by copy().
  std::uint64_t alignment = 1;
  // How much of the source's map to ask for at a time.
  std::uint64_t extent_window = 1ull << 30;
  // Called on the copy's thread as requests complete: when another 1% of the image
  // or another progress_interval has completed since the last call, and once at the
  // end. A callback that throws fails the copy with what it threw.
  ProgressCallback progress;
  static constexpr std::chrono::milliseconds progress_interval{50};
  // Optional: request() (from any thread) stops the copy, which then fails with a
  // cancellation.
  Cancellation* cancellation = nullptr;
};

// The request size a copy starts from: options.request_size when set; otherwise
// spliced_request_size when the payload goes by reference, else buffered_request_size.
std::size_t request_size_for(const CopyOptions& options, bool by_reference);

// Reconciles the request size, alignment and zero-detection granularity with the
// block sizes both endpoints impose; fails when they cannot be met together.
Status settle_sizes(CopyOptions& options, const BlockSizes& source, const BlockSizes& destination);

// The depth a copy runs at: options.depth when set; otherwise default_depth, or, when
// one end is `round_trip` away, enough requests of options.request_size to cover two
// round trips at latency_link_bytes_per_second (a request's reply is a round trip
// behind it, and queueing in the path adds about as much again), at most
// latency_in_flight_limit bytes. Near ends keep default_depth, which was measured as
// enough for them (docs/benchmarks.md) and spares a destination's disk a deeper queue:
// on a long link the extra requests are on the wire, not at the disk.
std::size_t depth_for(const CopyOptions& options, std::chrono::microseconds round_trip);

// The stripe a lane claims at a time: stripe_size rounded up to whole requests and to
// the alignment, so every stripe but the last ends on both. After settle_sizes.
std::uint64_t stripe_size_for(const CopyOptions& options);

// The lanes a copy of `image_size` bytes could run in, if both ends allow lanes:
// options.lanes when set, else one per CPU (`cpus`) up to max_automatic_lanes; never
// more than options.depth (each lane needs a request in flight) or the stripes. One
// for an image of a single stripe: a thread would cost more than it saves.
std::size_t lanes_for(const CopyOptions& options, std::uint64_t image_size, std::size_t cpus);

}  // namespace sluice
