// Facts about an open file that decide how it can be used as an image.
#pragma once

#include <cstdint>
#include <string>

#include "engine/error.hpp"

namespace sluice {

struct ImageFile {
  std::uint64_t size = 0;
  bool block_device = false;
  std::uint64_t allocated = 0;  // bytes allocated on disk (regular files)
  std::uint64_t device = 0;     // st_dev / st_ino identify the file
  std::uint64_t inode = 0;
};

// Fails clearly for anything that is neither a regular file nor a block device.
Result<ImageFile> inspect_image_file(int fd, const std::string& path);

}  // namespace sluice
