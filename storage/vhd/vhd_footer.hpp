// The VHD footer (512 bytes, big-endian): the one structure every VHD has, at the end
// of the file (and, for dynamic and differencing disks, copied at offset 0).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "engine/error.hpp"

namespace sluice::vhd {

enum class DiskType : std::uint32_t { fixed = 2, dynamic = 3, differencing = 4 };

std::string to_string(DiskType type);

using Uid = std::array<std::uint8_t, 16>;
// The canonical 8-4-4-4-12 hex form.
std::string to_string(const Uid& uid);

struct Footer {
  std::uint32_t features = 0;
  std::uint32_t version = 0;
  std::uint64_t data_offset = 0;  // the dynamic header; all ones for fixed disks
  std::uint32_t timestamp = 0;    // seconds since 2000-01-01 UTC
  std::string creator;            // 4 characters: "caml", "qemu", "tap ", "win "...
  std::uint32_t creator_version = 0;
  std::uint32_t creator_host_os = 0;
  std::uint64_t original_size = 0;
  std::uint64_t current_size = 0;  // the virtual size, exact
  std::uint16_t cylinders = 0;     // CHS geometry: not used for the size
  std::uint8_t heads = 0;
  std::uint8_t sectors_per_track = 0;
  DiskType disk_type = DiskType::fixed;
  std::uint32_t checksum = 0;
  Uid uid{};
  bool saved_state = false;
};

constexpr std::size_t footer_size = 512;

// True when `bytes` (at least 8) start with the footer cookie "conectix".
bool has_footer_cookie(std::span<const std::byte> bytes);

// Decodes and checks a footer (exactly footer_size bytes): cookie, checksum, version
// and disk type. The error says what is wrong, without the file or offset.
Result<Footer> parse_footer(std::span<const std::byte> bytes);

}  // namespace sluice::vhd
