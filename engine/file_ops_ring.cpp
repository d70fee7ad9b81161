#include "engine/file_ops_ring.hpp"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <functional>

#include "engine/completion.hpp"

namespace sluice {

struct FileOpsRing::Operation {
  std::function<void(io_uring_sqe*)> prepare;
  Completion* done = nullptr;
  int result = 0;
};

Result<std::unique_ptr<FileOpsRing>> FileOpsRing::create(executor ex, unsigned entries) {
  auto ring = std::make_unique<io_uring>();
  if (int rc = io_uring_queue_init(entries, ring.get(), 0); rc < 0)
    return fail(errno_code(-rc), "cannot set up an io_uring for file operations: " + errno_code(-rc).message());
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    auto code = errno_code(errno);
    io_uring_queue_exit(ring.get());
    return fail(code, "cannot create an eventfd: " + code.message());
  }
  if (int rc = io_uring_register_eventfd(ring.get(), fd); rc < 0) {
    ::close(fd);
    io_uring_queue_exit(ring.get());
    return fail(errno_code(-rc), "cannot register an eventfd with io_uring: " + errno_code(-rc).message());
  }
  return std::unique_ptr<FileOpsRing>(new FileOpsRing(ex, std::move(ring), fd));
}

FileOpsRing::FileOpsRing(executor ex, std::unique_ptr<io_uring> ring, int event_fd)
    : ex_(ex), ring_(std::move(ring)), events_(ex, event_fd) {}

FileOpsRing::~FileOpsRing() {
  asio::error_code ignored;
  events_.close(ignored);
  io_uring_queue_exit(ring_.get());
}

awaitable<std::error_code> FileOpsRing::run(Operation& operation) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {
    // The submission queue is full of entries not yet handed to the kernel; hand them
    // over and try once more.
    io_uring_submit(ring_.get());
    sqe = io_uring_get_sqe(ring_.get());
    if (sqe == nullptr) co_return std::make_error_code(std::errc::resource_unavailable_try_again);
  }
  operation.prepare(sqe);
  io_uring_sqe_set_data(sqe, &operation);
  Completion done(ex_);
  operation.done = &done;
  if (int rc = io_uring_submit(ring_.get()); rc < 0) co_return errno_code(-rc);
  ++pending_;
  watch();
  (void)co_await done.wait();
  co_return operation.result < 0 ? errno_code(-operation.result) : std::error_code{};
}

void FileOpsRing::watch() {
  if (watching_ || pending_ == 0) return;
  watching_ = true;
  // Only while operations are pending: an idle ring must not keep the loop alive.
  events_.async_read_some(asio::buffer(&event_count_, sizeof event_count_),
                          [this](const asio::error_code& ec, std::size_t) {
                            if (ec == asio::error::operation_aborted) return;  // closing
                            watching_ = false;
                            reap();
                            watch();
                          });
}

void FileOpsRing::reap() {
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
    auto* operation = static_cast<Operation*>(io_uring_cqe_get_data(cqe));
    operation->result = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    --pending_;
    operation->done->complete(Status{});
  }
}

awaitable<std::error_code> FileOpsRing::fdatasync(int fd) {
  Operation op{[fd](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC); }};
  co_return co_await run(op);
}

awaitable<std::error_code> FileOpsRing::fallocate(int fd, int mode, std::uint64_t offset, std::uint64_t length) {
  Operation op{[=](io_uring_sqe* sqe) {
    io_uring_prep_fallocate(sqe, fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length));
  }};
  co_return co_await run(op);
}

awaitable<std::error_code> FileOpsRing::fadvise(int fd, std::uint64_t offset, std::uint64_t length, int advice) {
  Operation op{[=](io_uring_sqe* sqe) {
    io_uring_prep_fadvise(sqe, fd, offset, static_cast<off_t>(length), advice);
  }};
  co_return co_await run(op);
}

}  // namespace sluice
