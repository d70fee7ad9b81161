#include "storage/vhd/vhd_chain.hpp"

#include <doctest/doctest.h>

using namespace sluice::vhd;

namespace {

// A dynamic member of 4 KiB blocks (8 sectors, one bitmap sector) and 3 blocks:
// block 0 at sector 10, full; block 1 absent; block 2 at sector 30, bitmap 10110000.
// The disk ends 100 bytes into sector 18, the third of block 2.
Member small_member() {
  Member m;
  m.footer.current_size = 2 * 4096 + 1024 + 100;
  m.footer.disk_type = DiskType::dynamic;
  Header h;
  h.block_size = 4096;
  m.header = h;
  m.bitmap_bytes = 512;
  m.bat = {10, 0xffffffff, 30};
  m.block_state = {Member::full, Member::absent, 0};
  m.bitmaps = {0xb0};
  return m;
}

}  // namespace

TEST_CASE("a member's runs: full blocks, absent blocks, bitmap bits MSB first") {
  const Member m = small_member();
  auto run = m.run_at(0, 100);
  CHECK(run.physical == std::optional<std::uint64_t>(10 * 512 + 512));
  CHECK(run.sectors == 8);  // to the end of the block, not beyond
  run = m.run_at(3, 2);
  CHECK(run.physical == std::optional<std::uint64_t>(10 * 512 + 512 + 3 * 512));
  CHECK(run.sectors == 2);
  run = m.run_at(8, 100);
  CHECK_FALSE(run.physical);
  CHECK(run.sectors == 8);
  // Block 2: bits 1 0 1 for sectors 16-18; bit 3 (set) lies past the disk's end.
  run = m.run_at(16, 100);
  CHECK(run.physical == std::optional<std::uint64_t>(30 * 512 + 512));
  CHECK(run.sectors == 1);
  run = m.run_at(17, 100);
  CHECK_FALSE(run.physical);
  CHECK(run.sectors == 1);
  run = m.run_at(18, 100);
  CHECK(run.physical == std::optional<std::uint64_t>(30 * 512 + 512 + 2 * 512));
  CHECK(run.sectors == 1);  // the size's last (partial) sector, no further
  // Past the end: nothing, for as long as asked.
  run = m.run_at(19, 7);
  CHECK_FALSE(run.physical);
  CHECK(run.sectors == 7);
}

TEST_CASE("a fixed member holds every sector of its size") {
  Member m;
  m.footer.current_size = 3 * 512;
  m.footer.disk_type = DiskType::fixed;
  auto run = m.run_at(1, 100);
  CHECK(run.physical == std::optional<std::uint64_t>(512));
  CHECK(run.sectors == 2);
  CHECK(m.holds_any(0, 1));
  CHECK_FALSE(m.holds_any(3 * 512, 4096));
}

TEST_CASE("holds_any: by block, within the size") {
  const Member m = small_member();
  CHECK(m.holds_any(0, 4096));
  CHECK_FALSE(m.holds_any(4096, 8192));
  CHECK(m.holds_any(4096, 8193));
  CHECK(m.holds_any(8192, 1 << 20));
  CHECK_FALSE(m.holds_any(m.size(), 1 << 20));
}
