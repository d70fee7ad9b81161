#include "storage/fallocate_outcome.hpp"

#include <doctest/doctest.h>

#include <initializer_list>

using sluice::classify_fallocate;
using sluice::FallocateOutcome;

TEST_CASE("EINVAL from a block device refuses one range; from a file, the mode") {
  CHECK(classify_fallocate(-EINVAL, true) == FallocateOutcome::refused_here);
  CHECK(classify_fallocate(-EINVAL, false) == FallocateOutcome::unsupported);
}

TEST_CASE("fallocate outcomes that do not depend on the kind of file") {
  for (bool block_device : {false, true}) {
    CHECK(classify_fallocate(0, block_device) == FallocateOutcome::done);
    CHECK(classify_fallocate(-EOPNOTSUPP, block_device) == FallocateOutcome::unsupported);
    CHECK(classify_fallocate(-ENOSYS, block_device) == FallocateOutcome::unsupported);
    CHECK(classify_fallocate(-EIO, block_device) == FallocateOutcome::failed);
    CHECK(classify_fallocate(-ENOSPC, block_device) == FallocateOutcome::failed);
  }
}
