// The allocation map of a file from SEEK_DATA / SEEK_HOLE.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/error.hpp"
#include "engine/extent.hpp"

namespace sluice {

// Extents of [offset, min(offset + length, size)) of the open file `fd`, at most
// `max_extents` of them (the caller asks again from where they stop). A hole running
// to the end of the file (ENXIO) is a hole; where SEEK_DATA is not supported (block
// devices, some filesystems) the whole range is data.
Result<std::vector<Extent>> file_extents(int fd, std::uint64_t size, std::uint64_t offset,
                                         std::uint64_t length, std::size_t max_extents = 4096);

}  // namespace sluice
