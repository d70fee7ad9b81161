#include "storage/vhd/vhd_bat.hpp"

#include <algorithm>

#include "storage/vhd/vhd_bytes.hpp"

namespace sluice::vhd {

std::vector<std::uint32_t> parse_bat(std::span<const std::byte> bytes, std::uint32_t entries) {
  std::vector<std::uint32_t> bat(entries);
  for (std::uint32_t i = 0; i < entries; ++i) bat[i] = be32(bytes, 4 * std::size_t{i});
  return bat;
}

Status check_bat(std::span<const std::uint32_t> bat, std::uint32_t used, const BatLayout& layout) {
  auto entry_name = [&](std::uint32_t i) {
    return "BAT entry " + std::to_string(i) + " (at offset " + std::to_string(layout.table_offset + 4ull * i) +
           ")";
  };
  struct Placed {
    std::uint64_t start;
    std::uint32_t index;
  };
  std::vector<Placed> blocks;
  for (std::uint32_t i = 0; i < used && i < bat.size(); ++i) {
    if (bat[i] == unallocated) continue;
    const std::uint64_t start = std::uint64_t{bat[i]} * sector;
    const std::uint64_t end = start + layout.block_bytes;
    if (end > layout.data_end)
      return fail(std::errc::invalid_argument, entry_name(i) + " puts its block at offset " + std::to_string(start) +
                                                   ", ending at " + std::to_string(end) +
                                                   ", past the end of the data at " +
                                                   std::to_string(layout.data_end) + " (truncated file?)");
    for (const FileRegion& r : layout.metadata)
      if (start < r.offset + r.length && r.offset < end)
        return fail(std::errc::invalid_argument, entry_name(i) + " puts its block at offset " +
                                                     std::to_string(start) + ", overlapping " + r.name +
                                                     " at offset " + std::to_string(r.offset));
    blocks.push_back({start, i});
  }
  std::sort(blocks.begin(), blocks.end(), [](const Placed& a, const Placed& b) { return a.start < b.start; });
  for (std::size_t k = 1; k < blocks.size(); ++k)
    if (blocks[k].start < blocks[k - 1].start + layout.block_bytes)
      return fail(std::errc::invalid_argument, entry_name(blocks[k].index) + " puts its block at offset " +
                                                   std::to_string(blocks[k].start) + ", overlapping block " +
                                                   std::to_string(blocks[k - 1].index) + " at offset " +
                                                   std::to_string(blocks[k - 1].start));
  return {};
}

}  // namespace sluice::vhd
