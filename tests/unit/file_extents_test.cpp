#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include "storage/file_extents.hpp"
#include "temp_dir.hpp"

using namespace sluice;
using test::TempDir;

namespace {
constexpr auto D = ExtentKind::data;
constexpr auto H = ExtentKind::hole;

std::vector<Extent> map_of(const std::string& path, std::uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY);
  auto extents = file_extents(fd, size, 0, size);
  ::close(fd);
  REQUIRE(extents);
  return *extents;
}
}  // namespace

TEST_CASE("holes at the start, in the middle and at the end") {
  TempDir dir;
  std::string path = dir.file("a.img");
  const std::uint64_t mib = 1u << 20;
  test::set_size(path, 10 * mib);
  test::write_at(path, 2 * mib, test::noise(mib, 1));
  test::write_at(path, 5 * mib, test::noise(mib, 2));
  auto map = map_of(path, 10 * mib);
  CHECK(map == std::vector<Extent>{{0, 2 * mib, H}, {2 * mib, mib, D}, {3 * mib, 2 * mib, H},
                                   {5 * mib, mib, D}, {6 * mib, 4 * mib, H}});
}

TEST_CASE("a size that is not a multiple of 4096 ends with data") {
  TempDir dir;
  std::string path = dir.file("b.img");
  const std::uint64_t size = 3 * 4096 + 77;
  test::set_size(path, size);
  test::write_at(path, size - 10, test::noise(10, 3));
  auto map = map_of(path, size);
  REQUIRE(map.size() == 2);
  CHECK(map[0] == Extent{0, 3 * 4096, H});
  CHECK(map[1] == Extent{3 * 4096, size - 3 * 4096, D});
}

TEST_CASE("an entirely sparse file is one hole; an empty file has no extents") {
  TempDir dir;
  std::string path = dir.file("c.img");
  test::set_size(path, 1u << 20);
  CHECK(map_of(path, 1u << 20) == std::vector<Extent>{{0, 1u << 20, H}});
  test::set_size(dir.file("empty.img"), 0);
  CHECK(map_of(dir.file("empty.img"), 0).empty());
}

TEST_CASE("a window starting inside an extent, and the extent limit") {
  TempDir dir;
  std::string path = dir.file("d.img");
  test::set_size(path, 64 * 4096);
  for (int i = 0; i < 64; i += 2) test::write_at(path, static_cast<std::uint64_t>(i) * 4096, test::noise(4096, 4));
  int fd = ::open(path.c_str(), O_RDONLY);
  auto some = file_extents(fd, 64 * 4096, 4096 + 100, 8192, 4096);
  REQUIRE(some);
  CHECK(some->front() == Extent{4196, 4096 - 100, H});
  auto limited = file_extents(fd, 64 * 4096, 0, 64 * 4096, 3);
  REQUIRE(limited);
  CHECK(limited->size() == 3);
  ::close(fd);
}

TEST_CASE("a pipe has no extent map and says so") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  auto map = file_extents(fds[0], 100, 0, 100);
  CHECK_FALSE(map);  // ESPIPE: not silently treated as data
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("where SEEK_DATA is not supported the whole range is data") {
  // procfs answers SEEK_DATA with EINVAL, as filesystems without sparse support do; the
  // size is the caller's (procfs files report 0), so the map covers what was asked.
  int fd = ::open("/proc/self/status", O_RDONLY);
  REQUIRE(fd >= 0);
  auto map = file_extents(fd, 10000, 512, 8000);
  ::close(fd);
  REQUIRE(map);
  REQUIRE(map->size() == 1);
  CHECK(map->front() == Extent{512, 8000, D});
}
