// What a failed fallocate() (punch hole, zero range) means for the calls after it.
#pragma once

#include <cerrno>

namespace sluice {

enum class FallocateOutcome {
  done,
  refused_here,  // this range falls back to the next way of zeroing; later ones may not
  unsupported,   // the mode does not work on this file: stop asking
  failed,        // a real error (EIO, ENOSPC, ...)
};

// `ret` as io_uring returns it (0 or -errno). A block device answers EINVAL for a range
// not aligned to its logical blocks (a 1 KiB hole on a 4 KiB-sector disk), which says
// nothing about aligned ranges; elsewhere EINVAL means the mode itself is refused.
inline FallocateOutcome classify_fallocate(int ret, bool block_device) {
  if (ret == 0) return FallocateOutcome::done;
  const int err = -ret;
  if (err == EINVAL) return block_device ? FallocateOutcome::refused_here : FallocateOutcome::unsupported;
  if (err == EOPNOTSUPP || err == ENOSYS) return FallocateOutcome::unsupported;
  return FallocateOutcome::failed;
}

}  // namespace sluice
