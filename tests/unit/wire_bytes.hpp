// Golden bytes for wire-format tests, written as hex by hand from the protocol text:
// wire("25609513 0001") is the byte sequence, spaces only for the reader's eye.
// hex() turns bytes back into one lower-case string so a mismatch prints readably.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

inline std::vector<std::byte> wire(std::string_view text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("bad hex digit in golden bytes");
  };
  std::vector<std::byte> out;
  int high = -1;
  for (char c : text) {
    if (c == ' ' || c == '\n') continue;
    if (high < 0) {
      high = nibble(c);
    } else {
      out.push_back(static_cast<std::byte>(high * 16 + nibble(c)));
      high = -1;
    }
  }
  if (high >= 0) throw std::invalid_argument("odd number of hex digits in golden bytes");
  return out;
}

inline std::string hex(std::span<const std::byte> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    out += digits[std::to_integer<unsigned>(b) >> 4];
    out += digits[std::to_integer<unsigned>(b) & 15];
  }
  return out;
}

// The golden string normalised the same way, for CHECK(hex(x) == golden("...")).
inline std::string golden(std::string_view text) { return hex(wire(text)); }

inline std::vector<std::byte> text_of(std::string_view text) {
  std::vector<std::byte> out;
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  return out;
}

}  // namespace sluice::test
