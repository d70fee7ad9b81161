// How a local file or block device is opened.
#pragma once

namespace sluice {

struct FileOptions {
  bool direct = false;  // O_DIRECT for aligned requests (the page cache is bypassed)
  // A destination keeps what the file already holds (never truncated; a regular file
  // smaller than the image is extended), as vhd-tool writes into an existing disk.
  // It then no longer reads as zeros, so zero ranges are written.
  bool keep_contents = false;
};

}  // namespace sluice
