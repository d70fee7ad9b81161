// Big-endian (network order) integers in byte spans: every NBD field is one of these.
//
// The fixed-size overloads take spans whose extent is part of the type, so a decoder
// that first checks a message's length and then slices it with subspan<offset, size>()
// cannot read past the end. The append_* helpers grow a vector for the variable-length
// handshake messages, which are built once per connection and are not on the data path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sluice::nbd {

constexpr std::uint16_t load_u16(std::span<const std::byte, 2> in) {
  return static_cast<std::uint16_t>((std::to_integer<unsigned>(in[0]) << 8) |
                                    std::to_integer<unsigned>(in[1]));
}

constexpr std::uint32_t load_u32(std::span<const std::byte, 4> in) {
  std::uint32_t v = 0;
  for (std::byte b : in) v = (v << 8) | std::to_integer<std::uint32_t>(b);
  return v;
}

constexpr std::uint64_t load_u64(std::span<const std::byte, 8> in) {
  std::uint64_t v = 0;
  for (std::byte b : in) v = (v << 8) | std::to_integer<std::uint64_t>(b);
  return v;
}

constexpr void store_u16(std::span<std::byte, 2> out, std::uint16_t v) {
  out[0] = static_cast<std::byte>(v >> 8);
  out[1] = static_cast<std::byte>(v);
}

constexpr void store_u32(std::span<std::byte, 4> out, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(v >> (8 * (3 - i)));
}

constexpr void store_u64(std::span<std::byte, 8> out, std::uint64_t v) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(v >> (8 * (7 - i)));
}

inline void append_u16(std::vector<std::byte>& out, std::uint16_t v) {
  std::byte b[2];
  store_u16(b, v);
  out.insert(out.end(), b, b + 2);
}

inline void append_u32(std::vector<std::byte>& out, std::uint32_t v) {
  std::byte b[4];
  store_u32(b, v);
  out.insert(out.end(), b, b + 4);
}

inline void append_u64(std::vector<std::byte>& out, std::uint64_t v) {
  std::byte b[8];
  store_u64(b, v);
  out.insert(out.end(), b, b + 8);
}

inline void append_bytes(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

}  // namespace sluice::nbd
