#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "protocols/chunked/chunk_header.hpp"

using namespace sluice;

namespace {

constexpr std::uint64_t MiB = 1 << 20;
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

std::vector<ChunkHeader> plan(std::uint64_t offset, std::uint64_t length,
                              std::uint32_t max_length = default_max_chunk_length) {
  auto planner = ChunkPlanner::create(offset, length, max_length);
  REQUIRE(planner);
  std::vector<ChunkHeader> chunks;
  while (auto chunk = planner->next()) chunks.push_back(*chunk);
  CHECK(planner->remaining() == 0);
  CHECK_FALSE(planner->next());
  return chunks;
}

std::string plan_error(std::uint64_t offset, std::uint64_t length, std::uint32_t max_length) {
  auto planner = ChunkPlanner::create(offset, length, max_length);
  REQUIRE_FALSE(planner);
  CHECK((planner.error().code == std::errc::invalid_argument));
  return planner.error().message;
}

}  // namespace

TEST_CASE("a coalesced 8193-sector extent becomes 4096 + 4096 + 1 sectors, as vhd-tool sends it") {
  const std::uint64_t start = 3 * 512;
  CHECK(plan(start, 8193 * 512) == std::vector<ChunkHeader>{{start, 2 * MiB},
                                                              {start + 2 * MiB, 2 * MiB},
                                                              {start + 4 * MiB, 512}});
}

TEST_CASE("chunks follow the extent, not 2 MiB boundaries") {
  CHECK(plan(512, 4 * MiB) == std::vector<ChunkHeader>{{512, 2 * MiB}, {512 + 2 * MiB, 2 * MiB}});
  CHECK(plan(0, 2 * MiB) == std::vector<ChunkHeader>{{0, 2 * MiB}});
  CHECK(plan(7 * MiB, 512) == std::vector<ChunkHeader>{{7 * MiB, 512}});
  CHECK(plan(4096, 0).empty());
}

TEST_CASE("a smaller maximum chunk length") {
  CHECK(plan(0, 150 * 1024, 64 * 1024) ==
        std::vector<ChunkHeader>{{0, 64 * 1024}, {64 * 1024, 64 * 1024}, {128 * 1024, 22 * 1024}});
}

TEST_CASE("remaining counts down as chunks are taken") {
  auto planner = ChunkPlanner::create(MiB, 5 * MiB);
  REQUIRE(planner);
  CHECK(planner->remaining() == 5 * MiB);
  planner->next();
  CHECK(planner->remaining() == 3 * MiB);
}

TEST_CASE("a large extent is covered contiguously and every chunk passes the receiver's checks") {
  const std::uint64_t start = 512;
  const std::uint64_t length = 64ull << 30;  // 64 GiB: 32768 chunks
  auto planner = ChunkPlanner::create(start, length);
  REQUIRE(planner);
  const ChunkLimits limits{start + length};
  std::uint64_t expected_offset = start;
  std::size_t count = 0;
  while (auto chunk = planner->next()) {
    REQUIRE(chunk->offset == expected_offset);
    REQUIRE(validate_chunk_header(*chunk, limits));
    expected_offset += chunk->length;
    ++count;
  }
  CHECK(expected_offset == start + length);
  CHECK(count == 32768);
}

TEST_CASE("planned chunks encode to the bytes vhd-tool would send") {
  std::vector<std::byte> stream;
  for (const ChunkHeader& chunk : plan(0, 2 * MiB + 512)) {
    auto header = encode_chunk_header(chunk);
    REQUIRE(header);
    stream.insert(stream.end(), header->begin(), header->end());
  }
  stream.insert(stream.end(), chunk_terminator_bytes.begin(), chunk_terminator_bytes.end());
  const int golden[] = {
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,  // offset 0, 2 MiB
      0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,  // offset 2 MiB, 512
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // terminator
  };
  std::vector<std::byte> expected;
  for (int b : golden) expected.push_back(static_cast<std::byte>(b));
  CHECK(stream == expected);
}

TEST_CASE("the planner refuses what would make bad chunks") {
  CHECK(plan_error(100, 512, default_max_chunk_length) == "extent at offset 100: offset is not a multiple of 512");
  CHECK(plan_error(512, 1000, default_max_chunk_length) ==
        "extent at offset 512: length 1000 is not a multiple of 512 (pad the image to a whole sector first)");
  CHECK(plan_error(u64_max - 511, 1024, default_max_chunk_length) ==
        "extent at offset 18446744073709551104: length 1024 overflows a 64-bit offset");
  CHECK(plan_error(0, 512, 0) == "chunk length 0 is not a positive multiple of 512");
  CHECK(plan_error(0, 512, 1000) == "chunk length 1000 is not a positive multiple of 512");
  CHECK(plan_error(0, 512, 64 * MiB) == "chunk length 67108864 exceeds the ceiling of 33554432");
}

TEST_CASE("image sizes are padded up to a whole sector") {
  CHECK(sector_padded_size(0) == 0u);
  CHECK(sector_padded_size(1) == 512u);
  CHECK(sector_padded_size(511) == 512u);
  CHECK(sector_padded_size(512) == 512u);
  CHECK(sector_padded_size(513) == 1024u);
  CHECK(sector_padded_size(10 * MiB + 1) == 10 * MiB + 512);
  CHECK(sector_padded_size(u64_max - 511) == u64_max - 511);  // 2^64 - 512 is whole
  CHECK(sector_padded_size(u64_max - 1022) == u64_max - 511);
  auto overflow = sector_padded_size(u64_max);
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().message == "image size 18446744073709551615 cannot be padded to a whole sector");
}
