// FileOpsRing: a private io_uring for the file operations Asio does not offer
// (fdatasync, fallocate, fadvise).
//
// They run in the kernel asynchronously, like Asio's own reads and writes; their
// completions reach the event loop through an eventfd the loop watches. A flush of a
// busy disk or a punch over gigabytes can take seconds, and doing them synchronously
// would stall every other connection and request on the loop's thread.
//
// Single-threaded like the rest of the engine: call it on its executor. The ring must
// outlive every operation started on it.
#pragma once

#include <cstdint>
#include <memory>

#include <asio/posix/stream_descriptor.hpp>

#include "engine/asio.hpp"
#include "engine/error.hpp"

struct io_uring;

namespace sluice {

class FileOpsRing {
 public:
  static Result<std::unique_ptr<FileOpsRing>> create(executor ex, unsigned entries = 64);
  ~FileOpsRing();
  FileOpsRing(const FileOpsRing&) = delete;
  FileOpsRing& operator=(const FileOpsRing&) = delete;

  // Each returns the system call's errno as an error_code (generic category), so the
  // caller can tell "not supported" from a real failure.
  awaitable<std::error_code> fdatasync(int fd);
  awaitable<std::error_code> fallocate(int fd, int mode, std::uint64_t offset, std::uint64_t length);
  awaitable<std::error_code> fadvise(int fd, std::uint64_t offset, std::uint64_t length, int advice);

  std::size_t in_flight() const { return pending_; }

 private:
  struct Operation;
  FileOpsRing(executor ex, std::unique_ptr<io_uring> ring, int event_fd);
  awaitable<std::error_code> run(Operation& operation);
  void watch();
  void reap();

  executor ex_;
  std::unique_ptr<io_uring> ring_;
  asio::posix::stream_descriptor events_;
  std::uint64_t event_count_ = 0;
  std::size_t pending_ = 0;
  bool watching_ = false;
};

}  // namespace sluice
