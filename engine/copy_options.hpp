// Knobs of one copy. Defaults are the measured ones (docs/benchmarks.md).
#pragma once

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

struct CopyOptions {
  static constexpr std::size_t default_depth = 8;
  static constexpr std::size_t default_request_size = 2u << 20;
  static constexpr std::size_t default_sparse = 4096;

  // Requests in flight; also the number of buffers, so memory is depth x request_size.
  std::size_t depth = default_depth;
  std::size_t request_size = default_request_size;
  // Zero-detection granularity for data read from the source; 0 turns it off.
  std::size_t sparse = default_sparse;
  // The destination already reads as zeros (--prezeroed / --destination-is-zero).
  bool destination_is_zero = false;
  // Zeroed ranges must stay allocated (NBD's NO_HOLE).
  bool allocated = false;
  bool flush = true;
  // Let data go from a file source to a splicing destination by reference (no copy
  // through this process) when nothing needs to look at the bytes (--no-zero-copy).
  bool zero_copy = true;
  // Boundary every request lies on (both ends' minimum block size); set by copy().
  std::uint64_t alignment = 1;
  // How much of the source's map to ask for at a time.
  std::uint64_t extent_window = 1ull << 30;
  // Called after each completed request, on the copy's thread.
  ProgressCallback progress;
  // Optional: request() stops the copy, which then fails with a cancellation.
  Cancellation* cancellation = nullptr;
};

// Reconciles the request size, alignment and zero-detection granularity with the
// block sizes both endpoints impose; fails when they cannot be met together.
Status settle_sizes(CopyOptions& options, const BlockSizes& source, const BlockSizes& destination);

}  // namespace sluice
