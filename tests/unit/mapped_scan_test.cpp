#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "engine/mapped_scan.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {

int memfd_of(std::size_t size, std::size_t data_from, std::size_t data_length) {
  int fd = ::memfd_create("sluice-mapped-scan-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  std::vector<std::byte> bytes(size);
  for (std::size_t i = data_from; i < data_from + data_length; ++i) bytes[i] = std::byte{0x5a};
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  return fd;
}

awaitable<Result<std::vector<Run>>> map_and_scan(int fd, std::uint64_t offset, std::size_t length,
                                                 bool shrink_first, std::uint64_t shrink_to) {
  auto range = co_await MappedRange::map(FileRing::of(co_await asio::this_coro::executor), fd, offset, length);
  if (!range) co_return tl::unexpected(range.error());
  // The file shrinks under the mapping: touching the lost pages raises SIGBUS.
  if (shrink_first) REQUIRE(::ftruncate(fd, static_cast<off_t>(shrink_to)) == 0);
  co_return range->zero_runs(offset, 4096);
}

}  // namespace

TEST_CASE("a mapped range scans like a buffer, at an unaligned offset") {
  const int fd = memfd_of(1 << 20, 300000, 5000);
  auto runs = test::run(map_and_scan(fd, 100, (1 << 20) - 100, false, 0));
  REQUIRE(runs);
  std::vector<std::byte> bytes((1 << 20) - 100);
  for (std::size_t i = 300000 - 100; i < 305000 - 100; ++i) bytes[i] = std::byte{0x5a};
  CHECK(*runs == scan_zero_runs(bytes, 100, 4096));
  CHECK(runs->size() == 3);
  ::close(fd);
}

TEST_CASE("a source that shrank under its mapping is an error, not a crash") {
  const int fd = memfd_of(1 << 20, 0, 1 << 20);
  auto runs = test::run(map_and_scan(fd, 0, 1 << 20, true, 4096));
  REQUIRE_FALSE(runs);
  CHECK(runs.error().message.find("shrank") != std::string::npos);
  // And the handler stays harmless afterwards: a later scan still works.
  REQUIRE(::ftruncate(fd, 1 << 20) == 0);
  auto again = test::run(map_and_scan(fd, 0, 1 << 20, false, 0));
  CHECK(again);
  ::close(fd);
}

TEST_CASE("a range past the end of the file fails when it is mapped") {
  const int fd = memfd_of(8192, 0, 8192);
  auto runs = test::run(map_and_scan(fd, 0, 1 << 20, false, 0));
  REQUIRE_FALSE(runs);
  CHECK(runs.error().message.find("shrank") != std::string::npos);
  ::close(fd);
}

namespace {

awaitable<Result<std::vector<Run>>> map_and_measure(int fd, std::size_t length, std::vector<std::byte>& scratch,
                                                     ScanCost& cost) {
  auto range = co_await MappedRange::map(FileRing::of(co_await asio::this_coro::executor), fd, 0, length);
  if (!range) co_return tl::unexpected(range.error());
  co_return range->zero_runs_measured(0, 4096, scratch, cost);
}

}  // namespace

TEST_CASE("a measured scan finds the same runs, copies the range and reports what both cost") {
  const int fd = memfd_of(1 << 20, 300000, 5000);
  std::vector<std::byte> scratch(1 << 20);
  ScanCost cost;
  auto runs = test::run(map_and_measure(fd, 1 << 20, scratch, cost));
  REQUIRE(runs);
  auto plain = test::run(map_and_scan(fd, 0, 1 << 20, false, 0));
  REQUIRE(plain);
  CHECK(*runs == *plain);
  CHECK(runs->size() == 3);
  CHECK(scratch[300000] == std::byte{0x5a});  // the copy is the range's bytes
  CHECK(scratch[299999] == std::byte{0});
  CHECK(cost.copy_ns_per_page > 0);
  ::close(fd);
}
