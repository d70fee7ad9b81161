// The block allocation table: one big-endian u32 per block, the sector where the
// block (its sector bitmap, then its data) starts, or all ones when it is absent.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/error.hpp"

namespace sluice::vhd {

constexpr std::uint32_t unallocated = 0xffffffff;

// `entries` values from `bytes` (at least 4 * entries bytes).
std::vector<std::uint32_t> parse_bat(std::span<const std::byte> bytes, std::uint32_t entries);

// A region of the file that blocks must not overlap.
struct FileRegion {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::string name;  // "the BAT", "the dynamic header"...
};

struct BatLayout {
  std::uint64_t table_offset = 0;  // where entry 0 is, for messages
  std::uint64_t block_bytes = 0;   // bitmap sectors plus data, as stored
  std::uint64_t data_end = 0;      // blocks must end by here (the trailing footer)
  std::vector<FileRegion> metadata;
};

// Checks the first `used` entries: each present block lies before data_end, overlaps
// no metadata region and no other block. The error names the entry and its offset.
Status check_bat(std::span<const std::uint32_t> bat, std::uint32_t used, const BatLayout& layout);

}  // namespace sluice::vhd
