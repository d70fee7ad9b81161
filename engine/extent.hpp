// What the extent expander works from: the source's allocation map.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice {

enum class ExtentKind : std::uint8_t {
  data,  // must be read and written
  zero,  // allocated, reads as zeros
  hole,  // unallocated, reads as zeros
};

struct Extent {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  ExtentKind kind = ExtentKind::data;

  std::uint64_t end() const { return offset + length; }
  bool reads_as_zero() const { return kind != ExtentKind::data; }
  friend bool operator==(const Extent&, const Extent&) = default;
};

constexpr std::string_view to_string(ExtentKind kind) {
  switch (kind) {
    case ExtentKind::data: return "data";
    case ExtentKind::zero: return "zero";
    case ExtentKind::hole: return "hole";
  }
  return "?";
}

}  // namespace sluice
