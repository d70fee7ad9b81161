#include "storage/null_destination.hpp"

#include <fcntl.h>

#include <cerrno>

namespace sluice {

awaitable<Status> NullDestination::write_from_pipe(std::uint64_t offset, std::size_t length, int pipe) {
  if (!dev_null_) {
    dev_null_ = UniqueFd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (!dev_null_) co_return fail_at("opening /dev/null", offset, errno_code(errno));
  }
  // The bytes are already in the pipe and /dev/null takes any amount at once, so these
  // calls cannot block the event loop.
  std::size_t left = length;
  while (left > 0) {
    ssize_t n = ::splice(pipe, nullptr, dev_null_.get(), nullptr, left, SPLICE_F_NONBLOCK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) co_return fail_at("discarding", offset + (length - left), errno_code(errno));
    if (n == 0)
      co_return fail_at("discarding", offset + (length - left), std::make_error_code(std::errc::io_error));
    left -= static_cast<std::size_t>(n);
  }
  co_return Status{};
}

}  // namespace sluice
