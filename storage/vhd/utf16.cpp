#include "storage/vhd/utf16.hpp"

#include <cstdint>

namespace sluice::vhd {

namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace

std::string utf16_to_utf8(std::span<const std::byte> bytes, ByteOrder order) {
  auto unit = [&](std::size_t i) {
    auto hi = std::to_integer<std::uint32_t>(bytes[2 * i]);
    auto lo = std::to_integer<std::uint32_t>(bytes[2 * i + 1]);
    return order == ByteOrder::big ? (hi << 8 | lo) : (lo << 8 | hi);
  };
  const std::size_t units = bytes.size() / 2;
  std::size_t i = 0;
  if (units > 0 && (unit(0) == 0xfeff || unit(0) == 0xfffe)) {
    if (unit(0) == 0xfffe) order = order == ByteOrder::big ? ByteOrder::little : ByteOrder::big;
    i = 1;
  }
  std::string out;
  for (; i < units; ++i) {
    std::uint32_t u = unit(i);
    if (u == 0) break;
    if (u >= 0xd800 && u < 0xdc00 && i + 1 < units && unit(i + 1) >= 0xdc00 && unit(i + 1) < 0xe000) {
      append_utf8(out, 0x10000 + ((u - 0xd800) << 10) + (unit(i + 1) - 0xdc00));
      ++i;
    } else if (u >= 0xd800 && u < 0xe000) {
      append_utf8(out, 0xfffd);
    } else {
      append_utf8(out, u);
    }
  }
  return out;
}

}  // namespace sluice::vhd
