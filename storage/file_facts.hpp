// FileFacts: what an open file is (its kind, size, filesystem), which decides how it
// can be used as an image; and opening an image's path to find out. Not an image
// itself: the NBD server's image in a file is FileImage (storage/file_image.*).
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

#include "engine/error.hpp"
#include "engine/unique_fd.hpp"

namespace sluice {

struct FileFacts {
  std::uint64_t size = 0;
  bool block_device = false;
  std::uint64_t allocated = 0;  // bytes allocated on disk (regular files)
  std::uint64_t device = 0;     // st_dev / st_ino identify the file
  std::uint64_t inode = 0;
  // A regular file whose page cache is its storage (tmpfs, ramfs): writing it copies
  // into memory and never waits for a device or for writeback throttling.
  bool memory_backed = false;
};

// Fails clearly for anything that is neither a regular file nor a block device.
Result<FileFacts> inspect_image_file(int fd, const std::string& path);

// open(2) for an image path that never blocks: opening a FIFO waits for its other end.
// What it opened is not judged here: pass the descriptor to inspect_image_file, which
// refuses a FIFO (or anything else neither a file nor a device) by name. A failed open
// of such a path is refused the same way. The error's message is "PATH: cause"; its
// code is the errno, for callers' hints.
Result<UniqueFd> open_image_file(const std::string& path, int flags, mode_t mode = 0);

// Opens a block device to write with O_EXCL, which the kernel refuses while the device
// is mounted or held by another claimant (RAID, LVM, device-mapper, another O_EXCL
// writer): writing under a live filesystem would destroy it. The claim lasts as long as
// the descriptor.
Result<UniqueFd> claim_block_device(const std::string& path, int flags);

}  // namespace sluice
