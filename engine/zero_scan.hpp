// Zero detection: which parts of a block of data read as zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sluice {

bool is_all_zero(std::span<const std::byte> bytes);

struct Run {
  std::size_t offset = 0;  // within the scanned span
  std::size_t length = 0;
  bool zero = false;
  friend bool operator==(const Run&, const Run&) = default;
};

// Splits `bytes` (which start at absolute offset `base`) into alternating data and
// zero runs. Chunks of `granularity` bytes, aligned to absolute offsets, are the unit:
// a chunk is zero only if every byte is; a short first or last chunk is judged alike.
// Adjacent chunks of the same kind merge, so one run covers the span when nothing
// changes.
std::vector<Run> scan_zero_runs(std::span<const std::byte> bytes, std::uint64_t base,
                                std::size_t granularity);

}  // namespace sluice
