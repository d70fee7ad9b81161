// How a local file or block device is opened.
#pragma once

#include <cstdint>

namespace sluice {

struct FileOptions {
  bool direct = false;  // O_DIRECT for aligned requests (the page cache is bypassed)
  // Destinations written through the page cache start writeback as each write
  // lands and, once this many bytes are dirty behind the newest write, wait for the
  // oldest range to reach the disk and drop it from the cache. The copy then runs at
  // the disk's pace, the final flush has little left to do, and a large copy does not
  // evict everything else from memory. 0 leaves it all to the kernel.
  std::uint64_t writeback_window = 64ull << 20;
  // A destination keeps what the file already holds (never truncated; a regular file
  // smaller than the image is extended), as vhd-tool writes into an existing disk.
  // It then no longer reads as zeros, so zero ranges are written.
  bool keep_contents = false;
};

}  // namespace sluice
