// Test helper for the malformed-input tests: seeded random bytes and byte-level
// mutations of valid messages.
//
// Every iteration draws from its own generator, seeded from (test seed, iteration), so
// a failure reported with both numbers replays alone, without the iterations before it.
// The mutations favour the values that break decoders (0x00, 0xff, sign bits, lengths
// one off) over uniform noise, which mostly trips the magic check and stops there.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <system_error>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

using Bytes = std::vector<std::byte>;

inline std::mt19937 iteration_rng(std::uint32_t seed, int iteration) {
  std::seed_seq sequence{seed, static_cast<std::uint32_t>(iteration)};
  return std::mt19937(sequence);
}

// Uniform in [low, high].
template <class Int>
Int pick(std::mt19937& rng, Int low, Int high) {
  return std::uniform_int_distribution<Int>(low, high)(rng);
}

inline bool one_in(std::mt19937& rng, unsigned n) { return pick<unsigned>(rng, 1, n) == 1; }

inline std::uint64_t random_u64(std::mt19937& rng) {
  return (static_cast<std::uint64_t>(rng()) << 32) | rng();
}

inline std::byte random_byte(std::mt19937& rng) {
  static constexpr unsigned char edges[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, '\r', '\n', ' ', ':'};
  if (one_in(rng, 2)) return static_cast<std::byte>(edges[pick<std::size_t>(rng, 0, std::size(edges) - 1)]);
  return static_cast<std::byte>(rng());
}

inline Bytes random_bytes(std::mt19937& rng, std::size_t max_size) {
  Bytes out(pick<std::size_t>(rng, 0, max_size));
  for (std::byte& b : out) b = random_byte(rng);
  return out;
}

// One to four edits: flip a bit, overwrite, insert, delete, truncate, duplicate a slice,
// or nudge a byte by one (turns a length into its neighbour). The result may be empty.
inline Bytes mutate(Bytes bytes, std::mt19937& rng) {
  const int edits = pick(rng, 1, 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = bytes.empty() ? 0 : pick<std::size_t>(rng, 0, bytes.size() - 1);
    switch (pick(rng, 0, 6)) {
      case 0:
        if (!bytes.empty()) bytes[at] ^= static_cast<std::byte>(1u << pick(rng, 0, 7));
        break;
      case 1:
        if (!bytes.empty()) bytes[at] = random_byte(rng);
        break;
      case 2: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), random_byte(rng)); break;
      case 3:
        if (!bytes.empty()) bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at));
        break;
      case 4: bytes.resize(pick<std::size_t>(rng, 0, bytes.size())); break;
      case 5:
        if (!bytes.empty()) {
          const std::size_t length = pick<std::size_t>(rng, 1, std::min<std::size_t>(8, bytes.size() - at));
          Bytes slice(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                      bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
          bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), slice.begin(), slice.end());
        }
        break;
      case 6:
        if (!bytes.empty())
          bytes[at] = static_cast<std::byte>(std::to_integer<unsigned>(bytes[at]) + (one_in(rng, 2) ? 1u : 255u));
        break;
    }
  }
  return bytes;
}

inline std::string as_text(const Bytes& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

inline Bytes as_bytes(std::string_view text) {
  Bytes out(text.size());
  std::transform(text.begin(), text.end(), out.begin(), [](char c) { return static_cast<std::byte>(c); });
  return out;
}

template <std::size_t N>
Bytes to_vector(const std::array<std::byte, N>& array) {
  return Bytes(array.begin(), array.end());
}

inline Bytes tail(const Bytes& bytes, std::size_t from) {
  return Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end());
}

// Integers read the way the tests' own restatement of each rule reads them. Written
// here rather than taken from the decoders' helpers (nbd/big_endian.hpp), so that a
// wrong reader there cannot agree with itself in the tests.
inline std::uint64_t load_be(std::span<const std::byte> bytes, std::size_t at, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < size; ++i) value = (value << 8) | std::to_integer<std::uint64_t>(bytes[at + i]);
  return value;
}

inline std::uint64_t load_le(std::span<const std::byte> bytes, std::size_t at, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t i = size; i-- > 0;) value = (value << 8) | std::to_integer<std::uint64_t>(bytes[at + i]);
  return value;
}

// A decoder's verdict on bad bytes: whether it accepted them; a refusal must say why,
// and, given `code`, be that kind of error.
template <class Result>
bool accepted_else_explained(const Result& result, std::optional<std::errc> code = std::nullopt) {
  if (result) return true;
  if (code) CHECK((result.error().code == *code));
  CHECK_FALSE(result.error().message.empty());
  return false;
}

}  // namespace sluice::test
