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

// scan_zero_runs in two steps, for callers that must scan where a fault may interrupt
// them (a mapped file): the scan writes one flag per chunk into memory the caller
// allocated, and allocates nothing itself; the runs are built afterwards.
std::size_t zero_chunk_count(std::size_t size, std::uint64_t base, std::size_t granularity);
void mark_zero_chunks(std::span<const std::byte> bytes, std::uint64_t base, std::size_t granularity,
                      std::span<std::uint8_t> flags);
std::vector<Run> runs_from_zero_chunks(std::size_t size, std::uint64_t base, std::size_t granularity,
                                       std::span<const std::uint8_t> flags);

}  // namespace sluice
