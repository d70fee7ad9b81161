#include "storage/vhd/vhd_bytes.hpp"

#include <cstdio>

namespace sluice::vhd {

std::uint32_t checksum(std::span<const std::byte> bytes, std::size_t checksum_at) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (i < checksum_at || i >= checksum_at + 4) sum += std::to_integer<std::uint32_t>(bytes[i]);
  return ~sum;
}

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

}  // namespace sluice::vhd
