#include "storage/file_facts.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>

namespace sluice {

namespace {
bool is_image_kind(mode_t mode) { return S_ISREG(mode) || S_ISBLK(mode); }

tl::unexpected<Error> not_an_image(const std::string& path) {
  return fail(std::errc::invalid_argument, path + ": not a regular file or block device");
}

// The type of the filesystem holding `fd` (statfs f_type); 0 when it cannot be told.
unsigned long filesystem_type(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return 0;
  return static_cast<unsigned long>(fs.f_type);
}

// The kernel's own filesystems, whose regular files report a size (0 in /proc, 4096
// in /sys) that is not their content: copied by that size, a /proc file became an
// empty image and the copy said it succeeded.
const char* pseudo_filesystem(unsigned long type) {
  switch (type) {
    case PROC_SUPER_MAGIC: return "proc";
    case SYSFS_MAGIC: return "sysfs";
    case DEBUGFS_MAGIC: return "debugfs";
    case TRACEFS_MAGIC: return "tracefs";
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC: return "cgroup";
    case SECURITYFS_MAGIC: return "securityfs";
    default: return nullptr;
  }
}

bool is_memory_filesystem(unsigned long type) { return type == TMPFS_MAGIC || type == RAMFS_MAGIC; }
}  // namespace

Result<FileFacts> inspect_image_file(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  FileFacts info;
  info.device = st.st_dev;
  info.inode = st.st_ino;
  if (S_ISREG(st.st_mode)) {
    const unsigned long type = filesystem_type(fd);
    if (const char* kind = pseudo_filesystem(type))
      return fail(std::errc::invalid_argument, path + ": a file of the kernel's " + kind +
                                                   " filesystem, whose size is not its content; not a disk image");
    info.size = static_cast<std::uint64_t>(st.st_size);
    info.allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
    info.memory_backed = is_memory_filesystem(type);
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
  return not_an_image(path);
}

Result<UniqueFd> open_image_file(const std::string& path, int flags, mode_t mode) {
  // O_NONBLOCK for the open only: a FIFO's open returns at once (or fails with ENXIO
  // when written with no reader) instead of waiting for a peer that may never come.
  UniqueFd fd(::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, mode));
  if (!fd) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !is_image_kind(st.st_mode) && !S_ISDIR(st.st_mode))
      return not_an_image(path);
    return fail(errno_code(err), path + ": " + errno_code(err).message());
  }
  // What was opened is judged by inspect_image_file, which every caller runs next.
  // Left set, it would make io_uring answer EAGAIN where it should wait for the disk.
  const int status_flags = ::fcntl(fd.get(), F_GETFL);
  if (status_flags < 0 || ::fcntl(fd.get(), F_SETFL, status_flags & ~O_NONBLOCK) != 0)
    return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  return fd;
}

Result<UniqueFd> claim_block_device(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_EXCL | O_CLOEXEC));
  if (fd) return fd;
  const int err = errno;
  if (err == EBUSY)
    return fail(errno_code(err), path + ": the device is in use (mounted, or held by RAID, LVM, device-mapper or "
                                        "another exclusive writer); nothing was written to it");
  return fail(errno_code(err), path + ": " + errno_code(err).message());
}

}  // namespace sluice
