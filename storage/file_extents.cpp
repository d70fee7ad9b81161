#include "storage/file_extents.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sluice {

Result<std::vector<Extent>> file_extents(int fd, std::uint64_t size, std::uint64_t offset,
                                         std::uint64_t length, std::size_t max_extents) {
  std::vector<Extent> extents;
  const std::uint64_t end = std::min(size, offset + length);
  auto add = [&](std::uint64_t from, std::uint64_t to, ExtentKind kind) {
    if (to > from) extents.push_back(Extent{from, to - from, kind});
  };
  std::uint64_t pos = offset;
  while (pos < end && extents.size() < max_extents) {
    off_t data = ::lseek(fd, static_cast<off_t>(pos), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) {  // no data after pos: the rest is a trailing hole
        add(pos, end, ExtentKind::hole);
        break;
      }
      if (errno == EINVAL || errno == EOPNOTSUPP) {  // no sparse support: all data
        add(pos, end, ExtentKind::data);
        break;
      }
      return fail_at("SEEK_DATA", pos, errno_code(errno));
    }
    std::uint64_t data_start = std::min<std::uint64_t>(static_cast<std::uint64_t>(data), end);
    add(pos, data_start, ExtentKind::hole);
    if (data_start >= end) break;
    off_t hole = ::lseek(fd, static_cast<off_t>(data_start), SEEK_HOLE);
    if (hole < 0) {
      if (errno == ENXIO) {  // the file shrank under us; let the read report it
        add(data_start, end, ExtentKind::data);
        break;
      }
      return fail_at("SEEK_HOLE", data_start, errno_code(errno));
    }
    std::uint64_t data_end = std::min<std::uint64_t>(static_cast<std::uint64_t>(hole), end);
    if (data_end <= data_start) data_end = end;  // cannot happen on a sane filesystem
    add(data_start, data_end, ExtentKind::data);
    pos = data_end;
  }
  return extents;
}

}  // namespace sluice
