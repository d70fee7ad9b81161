#include "storage/vhd/vhd_bat.hpp"

#include <doctest/doctest.h>

#include "wire_bytes.hpp"

using namespace sluice::vhd;
using sluice::test::wire;

TEST_CASE("BAT entries are big-endian sector numbers") {
  auto bat = parse_bat(wire("00000010 ffffffff 00001011"), 3);
  CHECK(bat == std::vector<std::uint32_t>{0x10, unallocated, 0x1011});
}

namespace {

// Blocks of 1 sector of bitmap and 4 sectors of data, in a file whose footer is at 8192.
BatLayout small_layout() {
  return BatLayout{1536, 5 * 512, 8192, {{0, 512, "the footer copy"}, {512, 1024, "the dynamic header"},
                                         {1536, 512, "the BAT"}}};
}

}  // namespace

TEST_CASE("a BAT whose blocks lie between the metadata and the footer passes") {
  std::vector<std::uint32_t> bat{4, unallocated, 9};
  CHECK(check_bat(bat, 3, small_layout()));
  // Entries beyond the used ones are not looked at.
  bat.push_back(1);
  CHECK(check_bat(bat, 3, small_layout()));
}

TEST_CASE("a block past the end of the data") {
  std::vector<std::uint32_t> bat{4, 12};  // 12*512 + 2560 = 8704 > 8192
  auto ok = check_bat(bat, 2, small_layout());
  REQUIRE_FALSE(ok);
  CHECK(ok.error().message ==
        "BAT entry 1 (at offset 1540) puts its block at offset 6144, ending at 8704, past the end of the data at "
        "8192 (truncated file?)");
  bat = {0xfffffffe};
  CHECK_FALSE(check_bat(bat, 1, small_layout()));
}

TEST_CASE("a block over the metadata") {
  std::vector<std::uint32_t> bat{unallocated, 2};
  CHECK(check_bat(bat, 2, small_layout()).error().message ==
        "BAT entry 1 (at offset 1540) puts its block at offset 1024, overlapping the dynamic header at offset 512");
  bat = {3};
  CHECK(check_bat(bat, 1, small_layout()).error().message ==
        "BAT entry 0 (at offset 1536) puts its block at offset 1536, overlapping the BAT at offset 1536");
}

TEST_CASE("two blocks that overlap") {
  std::vector<std::uint32_t> bat{8, 4};  // 4..9 and 8..13 (sectors)
  CHECK(check_bat(bat, 2, small_layout()).error().message ==
        "BAT entry 0 (at offset 1536) puts its block at offset 4096, overlapping block 1 at offset 2048");
  bat = {4, 4};
  CHECK_FALSE(check_bat(bat, 2, small_layout()));
}
