#include <doctest/doctest.h>

#include <vector>

#include "engine/extent_aligner.hpp"

using namespace sluice;

namespace {
std::vector<Extent> align(std::uint64_t alignment, std::uint64_t size, const std::vector<Extent>& in) {
  ExtentAligner aligner(alignment, size);
  std::vector<Extent> out;
  for (const Extent& e : in)
    for (const Extent& a : aligner.push(e)) out.push_back(a);
  for (const Extent& a : aligner.finish()) out.push_back(a);
  return out;
}
constexpr auto D = ExtentKind::data;
constexpr auto Z = ExtentKind::zero;
constexpr auto H = ExtentKind::hole;
}  // namespace

TEST_CASE("aligned extents pass through, same kinds merged") {
  auto out = align(4096, 16384, {{0, 4096, D}, {4096, 4096, D}, {8192, 8192, H}});
  CHECK(out == std::vector<Extent>{{0, 8192, D}, {8192, 8192, H}});
}

TEST_CASE("ragged edges of a hole become data") {
  auto out = align(65536, 1 << 20, {{0, 4096, D}, {4096, (1 << 20) - 4096, H}});
  CHECK(out == std::vector<Extent>{{0, 65536, D}, {65536, (1 << 20) - 65536, H}});
}

TEST_CASE("a hole smaller than the alignment is data") {
  auto out = align(65536, 196608, {{0, 70000, D}, {70000, 1000, Z}, {71000, 196608 - 71000, D}});
  CHECK(out == std::vector<Extent>{{0, 196608, D}});
}

TEST_CASE("the image end counts as aligned") {
  const std::uint64_t size = 65536 * 3 + 100;
  auto out = align(65536, size, {{0, 65536, D}, {65536, size - 65536, H}});
  CHECK(out == std::vector<Extent>{{0, 65536, D}, {65536, size - 65536, H}});
}

TEST_CASE("every emitted boundary is aligned or the end") {
  const std::uint64_t size = 10'000'000;
  std::vector<Extent> in;
  std::uint64_t off = 0;
  int i = 0;
  while (off < size) {
    std::uint64_t len = std::min<std::uint64_t>(size - off, 1000 + (i * 7919) % 300000);
    in.push_back({off, len, i % 3 == 0 ? D : (i % 3 == 1 ? Z : H)});
    off += len;
    ++i;
  }
  auto out = align(65536, size, in);
  std::uint64_t expect = 0;
  for (const Extent& e : out) {
    CHECK(e.offset == expect);
    CHECK((e.offset % 65536 == 0));
    CHECK((e.end() % 65536 == 0 || e.end() == size));
    expect = e.end();
  }
  CHECK(expect == size);
}
