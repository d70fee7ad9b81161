// How a local file or block device is opened.
#pragma once

namespace sluice {

struct FileOptions {
  bool direct = false;  // O_DIRECT for aligned requests (the page cache is bypassed)
};

}  // namespace sluice
