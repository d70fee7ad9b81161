#include "storage/file_handles.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace sluice {

Result<FileHandles::Lease> FileHandles::lend() {
  if (!idle_.empty()) {
    auto file = std::move(idle_.back());
    idle_.pop_back();
    return Lease(*this, std::move(file));
  }
  int copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return fail(errno_code(errno), "cannot duplicate a file descriptor");
  return Lease(*this, std::make_unique<asio::random_access_file>(ex_, copy));
}

awaitable<Status> read_exactly(asio::random_access_file& file, std::uint64_t offset,
                               std::span<std::byte> into) {
  std::size_t done = 0;
  while (done < into.size()) {
    auto [ec, n] = co_await file.async_read_some_at(
        offset + done, asio::buffer(into.data() + done, into.size() - done), use_nothrow);
    if (ec == asio::error::eof || (!ec && n == 0)) {
      co_return fail(std::errc::io_error,
                     "read at offset " + std::to_string(offset + done) +
                         ": unexpected end of file (the source shrank while being copied?)");
    }
    if (ec) co_return fail_at("read", offset + done, ec);
    done += n;
  }
  co_return Status{};
}

awaitable<Status> write_all(asio::random_access_file& file, std::uint64_t offset,
                            std::span<const std::byte> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    auto [ec, n] = co_await file.async_write_some_at(
        offset + done, asio::buffer(bytes.data() + done, bytes.size() - done), use_nothrow);
    if (ec) co_return fail_at("write", offset + done, ec);
    if (n == 0) co_return fail_at("write", offset + done, std::make_error_code(std::errc::io_error));
    done += n;
  }
  co_return Status{};
}

}  // namespace sluice
