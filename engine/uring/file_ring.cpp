#include "engine/uring/file_ring.hpp"

#include <fcntl.h>
#include <poll.h>

#include "engine/uring/pipe.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <string>

namespace sluice {

asio::execution_context::id FileRing::id;

namespace {
constexpr unsigned ring_entries = 1024;
}

FileRing::FileRing(asio::execution_context& context)
    : asio::execution_context::service(context),
      wakeups_(static_cast<asio::io_context&>(context)) {
  int ret = io_uring_queue_init(ring_entries, &ring_, 0);
  if (ret < 0) throw std::runtime_error(std::string("io_uring_queue_init: ") + std::strerror(-ret));
  ring_ready_ = true;
  eventfd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (eventfd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  ret = io_uring_register_eventfd(&ring_, eventfd_);
  if (ret < 0) throw std::runtime_error(std::string("io_uring_register_eventfd: ") + std::strerror(-ret));
  // The descriptor object owns a dup, so closing either never races the other.
  wakeups_.assign(::dup(eventfd_));
}

FileRing::~FileRing() {
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (eventfd_ >= 0) ::close(eventfd_);
}

FileRing& FileRing::of(const executor& ex) {
  return asio::use_service<FileRing>(asio::query(ex, asio::execution::context));
}

void FileRing::shutdown() {
  // The context is going away: wait for the kernel to finish what it started, then
  // destroy the pending handlers without running them (Asio's shutdown rule).
  asio::error_code ignored;
  wakeups_.close(ignored);
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
    auto* operation = static_cast<Operation*>(io_uring_cqe_get_data(cqe));
    const int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (operation->complete(result, false)) --in_flight_;
  }
}

io_uring_sqe* FileRing::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // queue full: hand what is there to the kernel, then retry
    submit_queued();
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void FileRing::start(Operation* operation, io_uring_sqe* sqe) {
  io_uring_sqe_set_data(sqe, operation);
  ++in_flight_;
  submit_queued();
  wait_for_completions();
}

// liburing publishes the queued SQEs to the kernel before it enters, so even when
// io_uring_enter refuses they are the kernel's, taken on the next entry: failing their
// operations here would leave the kernel a pointer to a freed one. A refusal for a
// full completion queue (EBUSY) or a passing shortage (EAGAIN) is retried after
// reaping; anything else means the ring itself is unusable.
void FileRing::submit_queued() {
  for (;;) {
    int ret = io_uring_submit(&ring_);
    if (ret >= 0) return;
    if (ret != -EBUSY && ret != -EAGAIN && ret != -EINTR)
      throw std::system_error(-ret, std::generic_category(), "io_uring_submit");
    reap();
  }
}

void FileRing::wait_for_completions() {
  if (waiting_ || in_flight_ == 0) return;
  waiting_ = true;
  // Only while operations are in flight, so an idle ring never keeps run() going.
  wakeups_.async_read_some(asio::buffer(&wakeup_count_, sizeof wakeup_count_),
                           [this](const asio::error_code& ec, std::size_t) {
                             waiting_ = false;
                             if (ec == asio::error::operation_aborted) return;
                             reap();
                             wait_for_completions();
                           });
}

void FileRing::reap() {
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    auto* operation = static_cast<Operation*>(io_uring_cqe_get_data(cqe));
    int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (operation->complete(result, true)) --in_flight_;
  }
}

awaitable<int> FileRing::read(int fd, std::uint64_t offset, std::span<std::byte> into, bool offload) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_read(sqe, fd, into.data(), static_cast<unsigned>(into.size()), offset);
    if (offload) sqe->flags |= IOSQE_ASYNC;
  });
}

awaitable<int> FileRing::write(int fd, std::uint64_t offset, std::span<const std::byte> from, bool offload) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_write(sqe, fd, from.data(), static_cast<unsigned>(from.size()), offset);
    if (offload) sqe->flags |= IOSQE_ASYNC;
  });
}

awaitable<void> FileRing::write_chain(int fd, std::span<const ChainedWrite> writes, std::span<int> results,
                                      bool offload) {
  return asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [this, fd, writes, results, offload](auto handler) {
        auto* chain = new ChainOperation;
        chain->caller = ParkedHandler::park(std::move(handler));
        chain->results = results;
        start_chain(chain, fd, writes, offload);
      },
      asio::use_awaitable);
}

void FileRing::start_chain(ChainOperation* chain, int fd, std::span<const ChainedWrite> writes, bool offload) {
  // The whole chain in one submission: a chain cut by a submit boundary would become
  // two chains, the second started before the first has finished.
  if (writes.empty() || writes.size() > max_chain) {
    for (int& r : chain->results) r = -EINVAL;
    chain->resume();
    delete chain;
    return;
  }
  if (io_uring_sq_space_left(&ring_) < writes.size()) submit_queued();
  chain->silent_successes = (ring_.features & IORING_FEAT_CQE_SKIP) != 0;
  chain->links.resize(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // room was made above
    const ChainedWrite& w = writes[i];
    io_uring_prep_write(sqe, fd, w.bytes.data(), static_cast<unsigned>(w.bytes.size()), w.offset);
    chain->results[i] = static_cast<int>(w.bytes.size());
    const bool last = i + 1 == writes.size();
    // Each completion posted wakes this thread through the eventfd: only the last
    // link's success is worth one.
    if (!last) sqe->flags |= IOSQE_IO_LINK | (chain->silent_successes ? IOSQE_CQE_SKIP_SUCCESS : 0);
    // The first goes to a worker, which then runs the rest of the chain itself.
    if (offload && i == 0) sqe->flags |= IOSQE_ASYNC;
    chain->links[i].chain = chain;
    chain->links[i].index = i;
    io_uring_sqe_set_data(sqe, &chain->links[i]);
  }
  ++in_flight_;
  submit_queued();
  wait_for_completions();
}

awaitable<int> FileRing::fsync(int fd, bool data_only) {
  return submit([=](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, data_only ? IORING_FSYNC_DATASYNC : 0); });
}

awaitable<int> FileRing::fallocate(int fd, int mode, std::uint64_t offset, std::uint64_t length) {
  return submit([=](io_uring_sqe* sqe) { io_uring_prep_fallocate(sqe, fd, mode, offset, length); });
}

awaitable<int> FileRing::sync_file_range(int fd, std::uint64_t offset, std::uint64_t length, unsigned flags) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_sync_file_range(sqe, fd, static_cast<unsigned>(length), offset, static_cast<int>(flags));
  });
}

awaitable<int> FileRing::fadvise(int fd, std::uint64_t offset, std::uint64_t length, int advice) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_fadvise(sqe, fd, offset, static_cast<off_t>(length), advice);
  });
}

awaitable<int> FileRing::splice(int fd_in, std::int64_t offset_in, int fd_out, std::int64_t offset_out,
                                 std::size_t length, unsigned flags) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_splice(sqe, fd_in, offset_in, fd_out, offset_out, static_cast<unsigned>(length), flags);
  });
}

awaitable<int> FileRing::madvise(void* address, std::size_t length, int advice) {
  return submit([=](io_uring_sqe* sqe) {
    io_uring_prep_madvise(sqe, address, static_cast<off_t>(length), advice);
    sqe->flags |= IOSQE_ASYNC;  // populating may read from disk: never on this thread
  });
}

awaitable<int> FileRing::poll(int fd, unsigned events) {
  return submit([=](io_uring_sqe* sqe) { io_uring_prep_poll_add(sqe, fd, events); });
}

namespace {

// A splice that touches a non-blocking socket: it answers -EAGAIN instead of waiting
// (io_uring cannot poll on a splice's behalf), so wait for the socket and try again.
awaitable<int> splice_waiting(FileRing& ring, int fd_in, int fd_out, std::size_t length, unsigned flags, int socket,
                              unsigned events) {
  for (;;) {
    int n = co_await ring.splice(fd_in, -1, fd_out, -1, length, flags);
    if (n != -EAGAIN) co_return n;
    int ready = co_await ring.poll(socket, events);
    if (ready < 0) co_return ready;
  }
}

}  // namespace

tl::unexpected<Error> fail_source_shrank(std::uint64_t offset) {
  return fail(std::errc::io_error, "read at offset " + std::to_string(offset) +
                                       ": unexpected end of file (the source shrank while being copied?)");
}

awaitable<Status> splice_file_to_pipe(FileRing& ring, int file, std::uint64_t offset, int pipe, std::size_t length) {
  for (std::size_t done = 0; done < length;) {
    int n = co_await ring.splice(file, static_cast<std::int64_t>(offset + done), pipe, -1, length - done, SPLICE_F_MOVE);
    if (n < 0) co_return fail_at("read", offset + done, errno_code(-n));
    if (n == 0)
      co_return fail_source_shrank(offset + done);
    done += static_cast<std::size_t>(n);
  }
  co_return Status{};
}

awaitable<Status> splice_pipe_to_file(FileRing& ring, int pipe, int file, std::uint64_t offset, std::size_t length) {
  for (std::size_t done = 0; done < length;) {
    int n = co_await ring.splice(pipe, -1, file, static_cast<std::int64_t>(offset + done), length - done, SPLICE_F_MOVE);
    if (n < 0) co_return fail_at("write", offset + done, errno_code(-n));
    if (n == 0) co_return fail_at("write", offset + done, std::make_error_code(std::errc::io_error));
    done += static_cast<std::size_t>(n);
  }
  co_return Status{};
}

Status splice_pipe_to_memory_file(int pipe, int file, std::uint64_t offset, std::size_t length) {
  for (std::size_t done = 0; done < length;) {
    auto at = static_cast<loff_t>(offset + done);
    ssize_t n = ::splice(pipe, nullptr, file, &at, length - done, SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_at("write", offset + done, errno_code(errno));
    if (n == 0) return fail_at("write", offset + done, std::make_error_code(std::errc::io_error));
    done += static_cast<std::size_t>(n);
  }
  return Status{};
}

awaitable<Status> splice_file_to_socket(FileRing& ring, Pipe& pipe, int file, std::uint64_t offset,
                                        std::uint64_t length, int socket, bool more,
                                        std::span<const std::byte> lead) {
  std::size_t led = lead.size();
  if (led > 0)
    if (Status s = pipe.put(lead); !s) co_return s;
  do {
    const std::size_t room = led > 0 ? pipe.capacity_after_lead() : pipe.capacity();
    const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(length, room));
    if (chunk > 0)
      if (Status s = co_await splice_file_to_pipe(ring, file, offset, pipe.write_end(), chunk); !s) co_return s;
    offset += chunk;
    length -= chunk;
    // Hold the socket's last partial segment only while more is known to follow.
    if (Status s = co_await splice_pipe_to_socket(ring, pipe.read_end(), led + chunk, socket, more || length > 0); !s)
      co_return s;
    led = 0;
  } while (length > 0);
  co_return Status{};
}

awaitable<Status> splice_pipe_to_socket(FileRing& ring, int pipe, std::size_t length, int socket, bool more) {
  const unsigned flags = SPLICE_F_MOVE | (more ? SPLICE_F_MORE : 0u);
  while (length > 0) {
    int out = co_await splice_waiting(ring, pipe, socket, length, flags, socket, POLLOUT);
    if (out < 0) co_return fail(errno_code(-out), "sending: " + errno_code(-out).message());
    if (out == 0) co_return fail(std::errc::broken_pipe, "sending: the connection was closed");
    length -= static_cast<std::size_t>(out);
  }
  co_return Status{};
}

awaitable<int> splice_socket_to_pipe(FileRing& ring, int socket, Pipe& pipe, std::size_t length) {
  co_return co_await splice_waiting(ring, socket, pipe.write_end(), length, SPLICE_F_MOVE, socket, POLLIN);
}

awaitable<Status> splice_socket_to_file(FileRing& ring, Pipe& pipe, int socket, int file, std::uint64_t offset,
                                        std::uint64_t length) {
  while (length > 0) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(length, pipe.capacity()));
    int in = co_await splice_socket_to_pipe(ring, socket, pipe, chunk);
    if (in < 0) co_return fail(errno_code(-in), "receiving: " + errno_code(-in).message());
    if (in == 0)
      co_return fail(std::errc::connection_reset, "the peer closed the connection with " + std::to_string(length) +
                                                      " bytes of payload still to come");
    const auto got = static_cast<std::size_t>(in);
    if (Status s = co_await splice_pipe_to_file(ring, pipe.read_end(), file, offset, got); !s) co_return s;
    offset += got;
    length -= got;
  }
  co_return Status{};
}

awaitable<Status> ring_read_exactly(FileRing& ring, int fd, std::uint64_t offset, std::span<std::byte> into,
                                    bool offload) {
  std::size_t done = 0;
  while (done < into.size()) {
    int n = co_await ring.read(fd, offset + done, into.subspan(done), offload);
    if (n < 0) co_return fail_at("read", offset + done, errno_code(-n));
    if (n == 0)
      co_return fail_source_shrank(offset + done);
    done += static_cast<std::size_t>(n);
  }
  co_return Status{};
}

awaitable<Status> ring_write_all(FileRing& ring, int fd, std::uint64_t offset, std::span<const std::byte> from,
                                 bool offload) {
  std::size_t done = 0;
  while (done < from.size()) {
    int n = co_await ring.write(fd, offset + done, from.subspan(done), offload);
    if (n < 0) co_return fail_at("write", offset + done, errno_code(-n));
    if (n == 0) co_return fail_at("write", offset + done, std::make_error_code(std::errc::io_error));
    done += static_cast<std::size_t>(n);
  }
  co_return Status{};
}

}  // namespace sluice
