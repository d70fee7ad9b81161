#include <doctest/doctest.h>

#include <vector>

#include "engine/zero_scan.hpp"

using namespace sluice;

TEST_CASE("is_all_zero") {
  std::vector<std::byte> bytes(100000);
  CHECK(is_all_zero(bytes));
  CHECK(is_all_zero(std::span<const std::byte>(bytes).first(0)));
  CHECK(is_all_zero(std::span<const std::byte>(bytes).first(5)));
  bytes[99999] = std::byte{1};
  CHECK_FALSE(is_all_zero(bytes));
  bytes[99999] = std::byte{0};
  bytes[3] = std::byte{1};
  CHECK_FALSE(is_all_zero(bytes));
  bytes[3] = std::byte{0};
  bytes[17] = std::byte{1};
  CHECK_FALSE(is_all_zero(bytes));
}

TEST_CASE("zero runs follow absolute granularity and merge") {
  std::vector<std::byte> bytes(16384);
  bytes[5000] = std::byte{1};  // in the second 4 KiB chunk
  auto runs = scan_zero_runs(bytes, 0, 4096);
  CHECK(runs == std::vector<Run>{{0, 4096, true}, {4096, 4096, false}, {8192, 8192, true}});

  // Base 1024: the first chunk is 3072 bytes long.
  runs = scan_zero_runs(bytes, 1024, 4096);
  CHECK(runs == std::vector<Run>{{0, 3072, true}, {3072, 4096, false}, {7168, 9216, true}});
}

TEST_CASE("a short trailing chunk is judged on its own") {
  std::vector<std::byte> bytes(4096 + 100, std::byte{1});
  for (std::size_t i = 4096; i < bytes.size(); ++i) bytes[i] = std::byte{0};
  auto runs = scan_zero_runs(bytes, 0, 4096);
  CHECK(runs == std::vector<Run>{{0, 4096, false}, {4096, 100, true}});
}
