// The dynamic disk header (1024 bytes, big-endian, "cxsparse"): where the BAT is, the
// block size, and for a differencing disk who its parent is.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "engine/error.hpp"
#include "storage/vhd/vhd_footer.hpp"

namespace sluice::vhd {

struct ParentLocatorEntry {
  std::uint32_t platform_code = 0;  // 0: unused
  std::uint32_t data_space = 0;
  std::uint32_t data_length = 0;  // bytes
  std::uint64_t data_offset = 0;  // bytes from the start of the file
};

struct Header {
  std::uint64_t table_offset = 0;  // the BAT, in bytes
  std::uint32_t version = 0;
  std::uint32_t max_table_entries = 0;
  std::uint32_t block_size = 0;  // bytes, a power of two
  std::uint32_t checksum = 0;
  Uid parent_uid{};
  std::uint32_t parent_timestamp = 0;
  std::string parent_name;  // UTF-8 (stored as UTF-16BE)
  std::array<ParentLocatorEntry, 8> locators{};
};

constexpr std::size_t header_size = 1024;
// Blocks outside these bounds are refused as absurd: no writer makes them, and a
// corrupt value would otherwise ask for giant bitmaps.
constexpr std::uint32_t min_block_size = 512;
constexpr std::uint32_t max_block_size = 1u << 30;

// Decodes and checks a header (exactly header_size bytes): cookie, checksum, version,
// block size. The error says what is wrong, without the file or offset.
Result<Header> parse_header(std::span<const std::byte> bytes);

}  // namespace sluice::vhd
