// libFuzzer target: a VHD's metadata as a hostile file holds it, read the way
// storage/vhd/vhd_chain.cpp reads it: the footer (512 bytes), the dynamic header (1024),
// the BAT checked against the file's layout, then each parent locator's data. The first
// input byte says whether to mend the footer's and header's checksums first, so that
// the fuzzer gets past them to the fields behind. An accepted BAT's present blocks lie
// inside the data area and overlap nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "storage/vhd/parent_locator.hpp"
#include "storage/vhd/vhd_bat.hpp"
#include "storage/vhd/vhd_bytes.hpp"
#include "storage/vhd/vhd_footer.hpp"
#include "storage/vhd/vhd_header.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using sluice::fuzz::accepted;
using sluice::fuzz::WireInput;

namespace {

// The bytes with their checksum field set to what they sum to.
std::vector<std::byte> mended(std::span<const std::byte> bytes, std::size_t checksum_at) {
  std::vector<std::byte> out(bytes.begin(), bytes.end());
  const std::uint32_t sum = vhd::checksum(out, checksum_at);
  for (std::size_t i = 0; i < 4; ++i) out[checksum_at + i] = static_cast<std::byte>(sum >> (24 - 8 * i));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  WireInput input(data, size);
  const bool mend = (input.take_byte() & 1) != 0;
  auto footer_bytes = input.take_exactly(vhd::footer_size);
  if (!footer_bytes) return 0;
  std::vector<std::byte> footer_copy = mend ? mended(*footer_bytes, 64)
                                            : std::vector<std::byte>(footer_bytes->begin(), footer_bytes->end());
  auto footer = vhd::parse_footer(footer_copy);
  if (!accepted(footer)) return 0;
  auto header_bytes = input.take_exactly(vhd::header_size);
  if (!header_bytes) return 0;
  std::vector<std::byte> header_copy = mend ? mended(*header_bytes, 36)
                                            : std::vector<std::byte>(header_bytes->begin(), header_bytes->end());
  auto header = vhd::parse_header(header_copy);
  if (!accepted(header)) return 0;
  FUZZ_REQUIRE(header->block_size >= vhd::min_block_size && header->block_size <= vhd::max_block_size);

  // As many entries as the header claims, up to what the input still holds.
  const std::uint32_t entries = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(header->max_table_entries, input.rest().size() / 4));
  auto table = input.take(std::size_t{entries} * 4);
  const std::vector<std::uint32_t> bat = vhd::parse_bat(table, entries);
  FUZZ_REQUIRE(bat.size() == entries);
  vhd::BatLayout layout;
  layout.table_offset = header->table_offset;
  const std::uint64_t bitmap_bytes = (header->block_size / vhd::sector + 7) / 8;
  layout.block_bytes = (bitmap_bytes + vhd::sector - 1) / vhd::sector * vhd::sector + header->block_size;
  layout.data_end = std::uint64_t{1} << 40;
  layout.metadata = {{0, vhd::footer_size, "the footer copy"},
                     {footer->data_offset, vhd::header_size, "the dynamic header"},
                     {header->table_offset, std::uint64_t{entries} * 4, "the BAT"}};
  if (Status checked = vhd::check_bat(bat, entries, layout); checked) {
    for (std::uint32_t entry : bat) {
      if (entry == vhd::unallocated) continue;
      const std::uint64_t start = std::uint64_t{entry} * vhd::sector;
      FUZZ_REQUIRE(start + layout.block_bytes <= layout.data_end);
    }
  } else {
    FUZZ_REQUIRE(!checked.error().message.empty());
  }

  for (const vhd::ParentLocatorEntry& locator : header->locators) {
    if (locator.platform_code == 0) continue;
    auto located = vhd::decode_parent_locator(locator.platform_code,
                                              input.take(std::min<std::size_t>(locator.data_length, 4096)));
    if (!accepted(located) || !*located) continue;
    FUZZ_REQUIRE(!(*located)->path.empty());
  }
  return 0;
}
