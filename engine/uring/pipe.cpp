#include "engine/uring/pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace sluice {

namespace {

long wanted_size() {
  long wanted = 1 << 20;
  std::ifstream limit("/proc/sys/fs/pipe-max-size");
  long max = 0;
  if (limit >> max && max > 0 && max < wanted) wanted = max;
  return wanted;
}

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// Repeats `step(done)` (one read() or write()) until `size` bytes have moved. A pipe
// that ends early is an I/O error: callers only move bytes known to fit or be there.
template <class Step>
Status move_all(std::size_t size, const char* what, Step step) {
  for (std::size_t done = 0; done < size;) {
    ssize_t n = step(done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const auto code = errno_code(n < 0 ? errno : EIO);
      return fail(code, std::string(what) + ": " + code.message());
    }
    done += static_cast<std::size_t>(n);
  }
  return Status{};
}

}  // namespace

std::size_t Pipe::planned_capacity() {
  static const std::size_t planned = static_cast<std::size_t>(wanted_size()) - page_size();
  return planned;
}

std::size_t Pipe::capacity_after_lead() const {
  // A pipe of two pages (what the kernel gives past the user's soft limit) has no room
  // left beside the lead: it then leaves alone, and the payload follows.
  return capacity_ > page_size() ? capacity_ - page_size() : 0;
}

std::size_t Pipe::lead_limit() { return page_size(); }

Status Pipe::put(std::span<const std::byte> bytes) const {
  return move_all(bytes.size(), "writing into a pipe", [&](std::size_t done) {
    return ::write(write_.get(), bytes.data() + done, bytes.size() - done);
  });
}

Status Pipe::take(std::span<std::byte> into) const {
  return move_all(into.size(), "reading out of a pipe", [&](std::size_t done) {
    return ::read(read_.get(), into.data() + done, into.size() - done);
  });
}

Result<Pipe> Pipe::create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(errno_code(errno), "cannot create a pipe: " + errno_code(errno).message());
  Pipe pipe;
  pipe.read_ = UniqueFd(fds[0]);
  pipe.write_ = UniqueFd(fds[1]);
  const long wanted = wanted_size();
  int got = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(wanted));
  if (got < 0) got = ::fcntl(fds[1], F_GETPIPE_SZ);
  // A pipe holds whole pages (one slot each): a file range that does not start on a page
  // boundary occupies one page more than its length. Promising one page less than the
  // pipe's size means a splice of capacity() bytes from any offset always fits; more
  // would block the splice forever on a full pipe.
  const std::size_t size = got > 0 ? static_cast<std::size_t>(got) : 65536;
  pipe.capacity_ = size - page_size();
  return pipe;
}

}  // namespace sluice
