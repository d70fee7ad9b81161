#include "storage/image_file.hpp"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>

namespace sluice {

Result<ImageFile> inspect_image_file(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  ImageFile info;
  info.device = st.st_dev;
  info.inode = st.st_ino;
  if (S_ISREG(st.st_mode)) {
    info.size = static_cast<std::uint64_t>(st.st_size);
    info.allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
    return info;
  }
  if (S_ISBLK(st.st_mode)) {
    std::uint64_t bytes = 0;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0)
      return fail(errno_code(errno), path + ": cannot get the device size: " + errno_code(errno).message());
    info.size = bytes;
    info.allocated = bytes;
    info.block_device = true;
    return info;
  }
  return fail(std::errc::invalid_argument, path + ": not a regular file or block device");
}

}  // namespace sluice
