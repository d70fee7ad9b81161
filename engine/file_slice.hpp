// FileSlice: payload that stays in a file. Where both ends allow it, the copier hands
// the destination this reference instead of a buffer, and a plain socket splices the
// bytes from the page cache without copying them into this process.
#pragma once

#include <cstdint>

namespace sluice {

struct FileSlice {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

}  // namespace sluice
