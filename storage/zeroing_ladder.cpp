#include "storage/zeroing_ladder.hpp"

#include <linux/falloc.h>

#include <algorithm>

#include "engine/uring/file_ring.hpp"
#include "storage/fallocate_outcome.hpp"

namespace sluice {

namespace {

constexpr std::size_t zero_chunk = 1u << 20;

constexpr int punch_hole_modes[] = {FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE};
// KEEP_SIZE on block devices too: the kernel takes ZERO_RANGE there with or without it
// (blkdev_fallocate), and with it a range past the end is clipped instead of refused.
constexpr int zero_range_modes[] = {FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};
constexpr int punch_and_allocate_modes[] = {FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_KEEP_SIZE};

const char* action(int mode) {
  if (mode & FALLOC_FL_PUNCH_HOLE) return "punching a hole";
  if (mode & FALLOC_FL_ZERO_RANGE) return "zeroing";
  return "allocating";
}

bool& support_for(FallocateSupport& support, int mode) {
  if (mode & FALLOC_FL_PUNCH_HOLE) return support.punch_hole;
  if (mode & FALLOC_FL_ZERO_RANGE) return support.zero_range;
  return support.allocate;
}

bool supported(ZeroingRung rung, FallocateSupport support) {
  switch (rung) {
    case ZeroingRung::punch_hole: return support.punch_hole;
    case ZeroingRung::zero_range: return support.zero_range;
    case ZeroingRung::punch_and_allocate: return support.punch_hole && support.allocate;
    case ZeroingRung::write_zeros: return true;
  }
  return false;
}

}  // namespace

ZeroingPlan plan_zeroing(FileKind kind, ZeroingNeeds needs, FallocateSupport support) {
  ZeroingPlan plan;
  auto add = [&](ZeroingRung rung) {
    if (supported(rung, support)) plan.rungs[plan.count++] = rung;
  };
  const bool block_device = kind == FileKind::block_device;
  if (needs.may_deallocate) add(ZeroingRung::punch_hole);
  // On a block device the kernel may write the zeros itself (no NOFALLBACK): not fast.
  if (!(block_device && needs.fast_only)) add(ZeroingRung::zero_range);
  // A hole refilled keeps the range allocated; a block device allocates nothing.
  if (!needs.may_deallocate && !block_device) add(ZeroingRung::punch_and_allocate);
  if (!needs.fast_only) add(ZeroingRung::write_zeros);
  return plan;
}

std::span<const int> fallocate_modes(ZeroingRung rung) {
  switch (rung) {
    case ZeroingRung::punch_hole: return punch_hole_modes;
    case ZeroingRung::zero_range: return zero_range_modes;
    case ZeroingRung::punch_and_allocate: return punch_and_allocate_modes;
    case ZeroingRung::write_zeros: return {};
  }
  return {};
}

awaitable<Result<bool>> ZeroingLadder::zero(FileRing& ring, int fd, std::uint64_t offset, std::uint64_t length,
                                            ZeroingNeeds needs) {
  const ZeroingPlan plan = plan_zeroing(kind_, needs, support_);
  for (ZeroingRung rung : plan.steps()) {
    // An earlier rung may have found out that this one cannot work either.
    if (rung == ZeroingRung::write_zeros || !supported(rung, support_)) continue;
    Result<bool> done = co_await climb(ring, fd, rung, offset, length);
    if (!done || *done) co_return done;
  }
  co_return false;
}

awaitable<Result<bool>> ZeroingLadder::punch(FileRing& ring, int fd, std::uint64_t offset, std::uint64_t length) {
  if (!support_.punch_hole) co_return false;
  co_return co_await climb(ring, fd, ZeroingRung::punch_hole, offset, length);
}

awaitable<Result<bool>> ZeroingLadder::climb(FileRing& ring, int fd, ZeroingRung rung, std::uint64_t offset,
                                             std::uint64_t length) {
  for (int mode : fallocate_modes(rung)) {
    const int ret = co_await ring.fallocate(fd, mode, offset, length);
    switch (classify_fallocate(ret, kind_ == FileKind::block_device)) {
      case FallocateOutcome::done: break;
      case FallocateOutcome::refused_here: co_return false;
      case FallocateOutcome::unsupported: support_for(support_, mode) = false; co_return false;
      case FallocateOutcome::failed: co_return fail_at(action(mode), offset, errno_code(-ret));
    }
  }
  co_return true;
}

std::span<const std::byte> zero_bytes(std::uint64_t length) {
  // Not const, which would put a MiB of zeros into the binary; nothing writes it.
  alignas(4096) static std::byte zeros[zero_chunk];
  return {zeros, static_cast<std::size_t>(std::min<std::uint64_t>(length, zero_chunk))};
}

}  // namespace sluice
