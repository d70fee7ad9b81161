// ZeroingLadder: how a range of a regular file or block device is made to read as
// zeros, cheapest first: punch a hole, zero the range in place, punch a hole and
// allocate it again, and last write zeros. Shared by FileDestination (copies) and
// FileImage (NBD exports), so both zero a file the same way.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class FileRing;

enum class FileKind : std::uint8_t { regular, block_device };

enum class ZeroingRung : std::uint8_t {
  punch_hole,          // deallocates: the range becomes a hole
  zero_range,          // zeroed in place, stays allocated
  punch_and_allocate,  // a hole filled at once with fresh (unwritten) allocation
  write_zeros,         // zeros written like data, by the caller
};

// What the caller allows.
struct ZeroingNeeds {
  bool may_deallocate = true;  // the range may become a hole
  bool fast_only = false;      // only metadata operations: never as slow as writing zeros
};

// What fallocate turned out to support on this file, learnt on first use.
struct FallocateSupport {
  bool punch_hole = true;
  bool zero_range = true;
  bool allocate = true;
};

// The rungs to try, in order; without write_zeros when only fast ways are allowed.
struct ZeroingPlan {
  std::array<ZeroingRung, 3> rungs{};
  std::size_t count = 0;
  // A view into the plan: not of a temporary one, which would be gone by the loop body.
  std::span<const ZeroingRung> steps() const& { return {rungs.data(), count}; }
  std::span<const ZeroingRung> steps() const&& = delete;
};
ZeroingPlan plan_zeroing(FileKind kind, ZeroingNeeds needs, FallocateSupport support);

// The fallocate(2) modes that carry out `rung`, in order, each made only once the one
// before succeeded (punch_and_allocate has two; write_zeros none).
std::span<const int> fallocate_modes(ZeroingRung rung);

class ZeroingLadder {
 public:
  explicit ZeroingLadder(FileKind kind) : kind_(kind) {}

  // Climbs the fallocate rungs for [offset, offset + length) of `fd`: true once one of
  // them made the range read as zeros, false when the caller must write zeros (or,
  // with fast_only, refuse). Fails on a real error (EIO, ENOSPC), naming the offset.
  awaitable<Result<bool>> zero(FileRing& ring, int fd, std::uint64_t offset, std::uint64_t length,
                               ZeroingNeeds needs);
  // The first rung alone (NBD TRIM): true when the range became a hole.
  awaitable<Result<bool>> punch(FileRing& ring, int fd, std::uint64_t offset, std::uint64_t length);

  bool punch_supported() const { return support_.punch_hole; }

 private:
  awaitable<Result<bool>> climb(FileRing& ring, int fd, ZeroingRung rung, std::uint64_t offset,
                                std::uint64_t length);

  FileKind kind_;
  FallocateSupport support_;
};

// Up to a chunk of zeros for the last rung, `length` bytes at most: read-only memory
// shared by every caller, aligned for O_DIRECT.
std::span<const std::byte> zero_bytes(std::uint64_t length);

// The last rung: writes zeros over [offset, offset + length) a chunk at a time through
// `write(offset, bytes)`, the caller's own write path.
template <typename Write>
awaitable<Status> write_zeros(std::uint64_t offset, std::uint64_t length, Write write) {
  while (length > 0) {
    const std::span<const std::byte> chunk = zero_bytes(length);
    if (Status s = co_await write(offset, chunk); !s) co_return s;
    offset += chunk.size();
    length -= chunk.size();
  }
  co_return Status{};
}

}  // namespace sluice
