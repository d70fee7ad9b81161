// Knobs of one copy. Defaults are the measured ones (docs/benchmarks.md, section
// "Why the defaults are what they are"). What a copy makes of them with its two ends
// is its plan (engine/copy_plan.hpp).
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
  // requests (8 MiB in all) stay in the last-level cache between those passes. Where
  // the payload goes by reference (spliced), the CPU never reads it and per-request
  // costs dominate: 2 MiB (docs/benchmarks.md, section "Request size").
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
  // 0: automatic (depth_for, engine/copy_plan.hpp): default_depth, more when an end is
  // a long round trip away.
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
  // A copy that stops early (cancelled, or a request failed) issues nothing more and
  // waits this long at most for the requests already in flight, so that both ends are
  // left cleanly (an NBD server answers them, then gets NBD_CMD_DISC); what is still
  // in flight then is cut off (both ends aborted). `sluice copy` uses --timeout here
  // when it is given.
  static constexpr std::chrono::milliseconds default_stop_grace{5000};
  std::chrono::milliseconds stop_grace = default_stop_grace;
};

}  // namespace sluice
