#include "engine/uring/pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace sluice {

Result<Pipe> Pipe::create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(errno_code(errno), "cannot create a pipe: " + errno_code(errno).message());
  Pipe pipe;
  pipe.read_ = UniqueFd(fds[0]);
  pipe.write_ = UniqueFd(fds[1]);
  long wanted = 1 << 20;
  std::ifstream limit("/proc/sys/fs/pipe-max-size");
  long max = 0;
  if (limit >> max && max > 0 && max < wanted) wanted = max;
  int got = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(wanted));
  if (got < 0) got = ::fcntl(fds[1], F_GETPIPE_SZ);
  // A pipe holds whole pages (one slot each): a file range that does not start on a page
  // boundary occupies one page more than its length. Promising one page less than the
  // pipe's size means a splice of capacity() bytes from any offset always fits; more
  // would block the splice forever on a full pipe.
  const std::size_t size = got > 0 ? static_cast<std::size_t>(got) : 65536;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  pipe.capacity_ = size - page;
  return pipe;
}

}  // namespace sluice
