// Big-endian field access and the one's-complement checksum shared by the VHD footer
// and dynamic header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace sluice::vhd {

inline std::uint64_t load_be(std::span<const std::byte> bytes, std::size_t offset, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value = (value << 8) | std::to_integer<std::uint64_t>(bytes[offset + i]);
  return value;
}
inline std::uint16_t be16(std::span<const std::byte> b, std::size_t at) {
  return static_cast<std::uint16_t>(load_be(b, at, 2));
}
inline std::uint32_t be32(std::span<const std::byte> b, std::size_t at) {
  return static_cast<std::uint32_t>(load_be(b, at, 4));
}
inline std::uint64_t be64(std::span<const std::byte> b, std::size_t at) { return load_be(b, at, 8); }

// The bitwise NOT of the sum of every byte, the 4-byte checksum field at
// `checksum_at` counted as zero.
std::uint32_t checksum(std::span<const std::byte> bytes, std::size_t checksum_at);

// "0x1234abcd", for messages.
std::string hex32(std::uint32_t value);

constexpr std::uint64_t sector = 512;

}  // namespace sluice::vhd
