#include "storage/zeroing_ladder.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/unique_fd.hpp"
#include "engine/uring/file_ring.hpp"
#include "run_loop.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"

using namespace sluice;

namespace {

constexpr int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
constexpr int zero_range = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
constexpr int allocate = FALLOC_FL_KEEP_SIZE;
constexpr int write_zeros_step = -1;  // stands for the last rung, which is no fallocate

// Every fallocate mode the plan would try, in order, then the explicit zeros if any.
std::vector<int> ladder_modes(FileKind kind, ZeroingNeeds needs, FallocateSupport support = {}) {
  std::vector<int> modes;
  const ZeroingPlan plan = plan_zeroing(kind, needs, support);  // steps() views into it
  for (ZeroingRung rung : plan.steps()) {
    if (rung == ZeroingRung::write_zeros) modes.push_back(write_zeros_step);
    for (int mode : fallocate_modes(rung)) modes.push_back(mode);
  }
  return modes;
}

using Modes = std::vector<int>;

}  // namespace

TEST_CASE("a regular file: a hole when allowed, else zeroed in place or refilled, then written zeros") {
  CHECK(ladder_modes(FileKind::regular, {.may_deallocate = true, .fast_only = false}) ==
        Modes{punch, zero_range, write_zeros_step});
  CHECK(ladder_modes(FileKind::regular, {.may_deallocate = false, .fast_only = false}) ==
        Modes{zero_range, punch, allocate, write_zeros_step});
  // All of these are metadata operations on a file, so all stay under FAST_ZERO.
  CHECK(ladder_modes(FileKind::regular, {.may_deallocate = true, .fast_only = true}) == Modes{punch, zero_range});
  CHECK(ladder_modes(FileKind::regular, {.may_deallocate = false, .fast_only = true}) ==
        Modes{zero_range, punch, allocate});
}

TEST_CASE("a block device: KEEP_SIZE with every mode, nothing to allocate, ZERO_RANGE not fast") {
  CHECK(ladder_modes(FileKind::block_device, {.may_deallocate = true, .fast_only = false}) ==
        Modes{punch, zero_range, write_zeros_step});
  CHECK(ladder_modes(FileKind::block_device, {.may_deallocate = false, .fast_only = false}) ==
        Modes{zero_range, write_zeros_step});
  CHECK(ladder_modes(FileKind::block_device, {.may_deallocate = true, .fast_only = true}) == Modes{punch});
  CHECK(ladder_modes(FileKind::block_device, {.may_deallocate = false, .fast_only = true}).empty());
}

TEST_CASE("a mode found unsupported is not tried again") {
  const ZeroingNeeds keep{.may_deallocate = false, .fast_only = false};
  CHECK(ladder_modes(FileKind::regular, keep, {.punch_hole = true, .zero_range = false, .allocate = true}) ==
        Modes{punch, allocate, write_zeros_step});
  CHECK(ladder_modes(FileKind::regular, keep, {.punch_hole = true, .zero_range = false, .allocate = false}) ==
        Modes{write_zeros_step});
  CHECK(ladder_modes(FileKind::regular, {.may_deallocate = true, .fast_only = false},
                     {.punch_hole = false, .zero_range = true, .allocate = true}) == Modes{zero_range, write_zeros_step});
}

TEST_CASE("the explicit zeros are whole chunks of zeros, aligned for O_DIRECT") {
  const auto small = zero_bytes(4096);
  CHECK(small.size() == 4096);
  const auto large = zero_bytes(std::uint64_t{1} << 40);
  CHECK(large.size() == 1u << 20);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % 4096 == 0);
  CHECK(std::all_of(large.begin(), large.end(), [](std::byte b) { return b == std::byte{0}; }));
}

// tmpfs has no ZERO_RANGE: a range that must stay allocated is punched and allocated
// again, which reads as zeros with every block still there.
TEST_CASE("on tmpfs, zeroing that keeps the allocation refills a punched hole" * doctest::test_suite("environment")) {
  if (::access("/dev/shm", W_OK) != 0) {
    test::skip_test("no writable /dev/shm here");
    return;
  }
  const std::string path = "/dev/shm/sluice-zeroing-ladder-" + std::to_string(::getpid());
  constexpr std::size_t size = 1u << 20;
  test::write_at(path, 0, std::vector<char>(size, 'x'));
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ::unlink(path.c_str());
  REQUIRE(fd);
  struct stat before {};
  REQUIRE(::fstat(fd.get(), &before) == 0);

  asio::io_context context(1);
  ZeroingLadder ladder(FileKind::regular);
  auto zeroed = test::run(context, ladder.zero(FileRing::of(context.get_executor()), fd.get(), 65536, 131072,
                                               {.may_deallocate = false, .fast_only = false}));
  REQUIRE(zeroed);
  CHECK(*zeroed);  // done by fallocate: nothing left to write

  std::vector<char> back(size);
  REQUIRE(::pread(fd.get(), back.data(), size, 0) == static_cast<ssize_t>(size));
  CHECK(std::count(back.begin(), back.begin() + 65536, 'x') == 65536);
  CHECK(std::count(back.begin() + 65536, back.begin() + 196608, '\0') == 131072);
  CHECK(std::count(back.begin() + 196608, back.end(), 'x') == static_cast<long>(size - 196608));
  struct stat after {};
  REQUIRE(::fstat(fd.get(), &after) == 0);
  CHECK(after.st_blocks == before.st_blocks);
}
