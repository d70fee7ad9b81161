// WireReader: a bounds-checked cursor over a received payload.
//
// Variable-length NBD payloads (a length-prefixed name, then a count, then a list) are
// parsed field by field; every take fails instead of reading past the end, so a peer
// that lies about a length gets an error, never an over-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "protocols/nbd/big_endian.hpp"

namespace sluice::nbd {

class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> bytes) : rest_(bytes) {}

  std::size_t remaining() const { return rest_.size(); }
  bool empty() const { return rest_.empty(); }

  std::optional<std::uint16_t> u16() {
    auto b = take(2);
    if (!b) return std::nullopt;
    return load_u16(b->first<2>());
  }
  std::optional<std::uint32_t> u32() {
    auto b = take(4);
    if (!b) return std::nullopt;
    return load_u32(b->first<4>());
  }
  std::optional<std::uint64_t> u64() {
    auto b = take(8);
    if (!b) return std::nullopt;
    return load_u64(b->first<8>());
  }
  std::optional<std::span<const std::byte>> take(std::size_t n) {
    if (n > rest_.size()) return std::nullopt;
    auto out = rest_.first(n);
    rest_ = rest_.subspan(n);
    return out;
  }
  // Everything not yet taken (a trailing string whose length is the message's rest).
  std::span<const std::byte> take_rest() {
    auto out = rest_;
    rest_ = {};
    return out;
  }

 private:
  std::span<const std::byte> rest_;
};

}  // namespace sluice::nbd
