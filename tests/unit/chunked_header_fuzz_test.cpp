// Malformed-input tests for the Chunked header decoder. The receiver has no other line
// of defence (the format has no replies), so every header it accepts must already
// satisfy what the writer behind it assumes.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <span>
#include <string>

#include "protocols/chunked/chunk_header.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::test;

namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

// Image sizes that sit on and next to the boundaries the decoder reasons about.
std::uint64_t random_image_size(std::mt19937& rng) {
  switch (pick(rng, 0, 4)) {
    case 0: return pick<std::uint64_t>(rng, 0, 4096);
    case 1: return pick<std::uint64_t>(rng, 1, 1u << 16) * 512;
    case 2: return pick<std::uint64_t>(rng, 1, 1u << 16) * 512 + pick<std::uint64_t>(rng, 1, 511);
    case 3: return u64_max - pick<std::uint64_t>(rng, 0, 2048);
    default: return random_u64(rng);
  }
}

ChunkLimits random_limits(std::mt19937& rng) {
  ChunkLimits limits;
  limits.image_size = random_image_size(rng);
  // Some limits are out of range on purpose: the decoder must clamp to the ceiling
  // rather than trust a configuration that check_chunk_limits would have refused.
  switch (pick(rng, 0, 3)) {
    case 0: limits.max_length = default_max_chunk_length; break;
    case 1: limits.max_length = pick<std::uint32_t>(rng, 1, max_chunk_length_ceiling / 512) * 512; break;
    case 2: limits.max_length = std::numeric_limits<std::uint32_t>::max(); break;
    default: limits.max_length = static_cast<std::uint32_t>(rng()); break;
  }
  return limits;
}

// The acceptance rule, restated from the header's documentation in terms of sector
// counts so that it shares no arithmetic with the decoder.
bool acceptable(const ChunkHeader& h, const ChunkLimits& limits) {
  if (h.offset == 0 && h.length == 0) return true;
  if (h.length == 0 || h.offset % 512 != 0 || h.length % 512 != 0) return false;
  const std::uint64_t max_length = std::min(limits.max_length, max_chunk_length_ceiling);
  if (h.length > max_length) return false;
  const std::uint64_t first_sector = h.offset / 512;
  const std::uint64_t sectors = h.length / 512;
  const std::uint64_t sectors_in_u64 = u64_max / 512 + 1;  // offsets 0 .. 2^64 - 1
  if (sectors > sectors_in_u64 - first_sector - 1) return false;  // would end at or past 2^64
  const std::uint64_t image_sectors = limits.image_size / 512 + (limits.image_size % 512 != 0 ? 1 : 0);
  return first_sector + sectors <= image_sectors;
}

// A header the decoder must accept for `limits`, or nothing if the image is too small.
std::optional<ChunkHeader> random_valid_header(std::mt19937& rng, const ChunkLimits& limits) {
  if (one_in(rng, 20)) return chunk_terminator;
  const std::uint64_t max_length = std::min(limits.max_length, max_chunk_length_ceiling);
  const std::uint64_t image_sectors = limits.image_size / 512 + (limits.image_size % 512 != 0 ? 1 : 0);
  // Sectors below 2^64 / 512 - 1 keep the end strictly below 2^64.
  const std::uint64_t usable = std::min(image_sectors, u64_max / 512);
  if (max_length < 512 || usable == 0) return std::nullopt;
  const std::uint64_t sectors = pick<std::uint64_t>(rng, 1, std::min(max_length / 512, usable));
  const std::uint64_t first = one_in(rng, 3) ? usable - sectors : pick<std::uint64_t>(rng, 0, usable - sectors);
  return ChunkHeader{first * 512, static_cast<std::uint32_t>(sectors * 512)};
}

}  // namespace

TEST_CASE("chunk header fuzz: random valid headers survive encode and decode unchanged") {
  const std::uint32_t seed = 0xc4a11;
  int decoded_count = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const ChunkLimits limits = random_limits(rng);
    CAPTURE(limits.image_size);
    CAPTURE(limits.max_length);
    auto header = random_valid_header(rng, limits);
    if (!header) continue;
    CAPTURE(header->offset);
    CAPTURE(header->length);
    REQUIRE(acceptable(*header, limits));
    auto bytes = encode_chunk_header(*header);
    REQUIRE(bytes);
    auto decoded = decode_chunk_header(*bytes, limits);
    REQUIRE(decoded);
    CHECK(*decoded == *header);
    ++decoded_count;
  }
  // The generator must not degenerate into skipping everything.
  CHECK(decoded_count > 2000);
}

TEST_CASE("chunk header fuzz: any 12 bytes read back to the same bytes") {
  const std::uint32_t seed = 0xb17e5;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    Bytes input(chunk_header_size);
    for (std::byte& b : input) b = random_byte(rng);
    INFO("input: ", hex(input));
    auto header = read_chunk_header(input);
    REQUIRE(header);
    CHECK(header->offset == load_le(input, 0, 8));
    CHECK(header->length == load_le(input, 8, 4));
    auto again = encode_chunk_header(*header);
    // Lengths with the top bit set are vhd-tool's negative int32s: never sent.
    if (header->length > 0x7fffffffu) {
      REQUIRE_FALSE(again);
      CHECK_FALSE(again.error().message.empty());
      continue;
    }
    REQUIRE(again);
    CHECK(hex(*again) == hex(input));
  }
}

TEST_CASE("chunk header fuzz: mutated headers are refused with a reason, or obey the limits") {
  const std::uint32_t seed = 0x3a7a7e;
  int accepted = 0;
  int refused = 0;
  for (int iteration = 0; iteration < 5000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const ChunkLimits limits = random_limits(rng);
    CAPTURE(limits.image_size);
    CAPTURE(limits.max_length);
    auto valid = random_valid_header(rng, limits);
    Bytes input;
    if (valid) {
      auto encoded = encode_chunk_header(*valid);
      REQUIRE(encoded);
      input.assign(encoded->begin(), encoded->end());
    } else {
      input = random_bytes(rng, 16);
    }
    // Bytes after the header are the payload's; the decoder must not look at them.
    if (one_in(rng, 4)) input.push_back(random_byte(rng));
    input = mutate(std::move(input), rng);
    INFO("input: ", hex(input));

    auto decoded = decode_chunk_header(input, limits);
    if (input.size() < chunk_header_size) {
      REQUIRE_FALSE(decoded);
      CHECK(decoded.error().message ==
            "truncated chunk header: got " + std::to_string(input.size()) + " of 12 bytes");
      ++refused;
      continue;
    }
    const ChunkHeader raw{load_le(input, 0, 8), static_cast<std::uint32_t>(load_le(input, 8, 4))};
    CAPTURE(raw.offset);
    CAPTURE(raw.length);
    REQUIRE(decoded.has_value() == acceptable(raw, limits));
    if (decoded) {
      CHECK(*decoded == raw);
      ++accepted;
    } else {
      CHECK((decoded.error().code == std::errc::protocol_error));
      CHECK(decoded.error().message.rfind("chunk at offset " + std::to_string(raw.offset) + ": ", 0) == 0);
      ++refused;
    }
  }
  // Both outcomes must be exercised, or the test proves nothing about one of them.
  CHECK(accepted > 500);
  CHECK(refused > 500);
}

TEST_CASE("chunk header fuzz: every proper prefix of a header is reported as truncated") {
  const std::uint32_t seed = 0x9e1f;
  for (int iteration = 0; iteration < 500; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const ChunkLimits limits = random_limits(rng);
    auto header = random_valid_header(rng, limits);
    if (!header) continue;
    auto encoded = encode_chunk_header(*header);
    REQUIRE(encoded);
    for (std::size_t n = 0; n < chunk_header_size; ++n) {
      CAPTURE(n);
      auto prefix = std::span<const std::byte>(*encoded).first(n);
      auto read = read_chunk_header(prefix);
      REQUIRE_FALSE(read);
      CHECK((read.error().code == std::errc::protocol_error));
      auto decoded = decode_chunk_header(prefix, limits);
      REQUIRE_FALSE(decoded);
      CHECK(decoded.error().message == read.error().message);
    }
  }
}
