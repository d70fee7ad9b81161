// FileRing: a private io_uring for file I/O, one per io_context (an Asio service, so
// every event-loop thread has its own and nothing is shared between transfers).
//
// Asio's io_uring backend covers reads and writes only, keeps one operation in flight
// per file object, and cannot ask for IOSQE_ASYNC. The file data path wants more:
// any number of reads and writes in flight on one descriptor; buffered reads and
// writes handed to the kernel's io-wq workers (IOSQE_ASYNC) so page-cache copies run
// on other cores while this thread keeps the pipeline fed; and fsync, fallocate,
// sync_file_range and fadvise as asynchronous operations instead of blocking calls.
//
// Completions reach Asio through an eventfd registered with the ring and read by an
// Asio descriptor; each completion is posted (never dispatched) to its coroutine's
// executor, so no coroutine resumes inside the reaping loop.
#pragma once

#include <liburing.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <asio/async_result.hpp>
#include <asio/execution_context.hpp>
#include <asio/posix/stream_descriptor.hpp>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/parked_handler.hpp"

namespace sluice {

class FileRing : public asio::execution_context::service {
 public:
  using key_type = FileRing;
  static asio::execution_context::id id;

  explicit FileRing(asio::execution_context& context);
  ~FileRing() override;

  // The ring of the io_context behind `ex`.
  static FileRing& of(const executor& ex);

  // Each returns the kernel's result: bytes or 0 on success, -errno on failure.
  // `offload` asks for io-wq execution (buffered I/O on another core).
  awaitable<int> read(int fd, std::uint64_t offset, std::span<std::byte> into, bool offload);
  awaitable<int> write(int fd, std::uint64_t offset, std::span<const std::byte> from, bool offload);

  // Several writes to `fd` as one linked chain: an io-wq worker runs them back to back,
  // with no trip through this thread between them. Each one's result lands in
  // `results` (same length as `writes`): bytes written, or -errno. A write that fails
  // or comes up short ends the chain; those after it are not made and read -ECANCELED.
  struct ChainedWrite {
    std::uint64_t offset;
    std::span<const std::byte> bytes;
  };
  awaitable<void> write_chain(int fd, std::span<const ChainedWrite> writes, std::span<int> results, bool offload);
  // Most writes one chain may hold (a chain goes into the submission queue whole).
  static constexpr std::size_t max_chain = 256;
  awaitable<int> fsync(int fd, bool data_only);
  awaitable<int> fallocate(int fd, int mode, std::uint64_t offset, std::uint64_t length);
  awaitable<int> sync_file_range(int fd, std::uint64_t offset, std::uint64_t length, unsigned flags);
  awaitable<int> fadvise(int fd, std::uint64_t offset, std::uint64_t length, int advice);
  // splice(2) between a pipe and a file or socket; -1 for the offset of a pipe or
  // socket. SPLICE_F_MORE on a socket means what MSG_MORE means.
  awaitable<int> splice(int fd_in, std::int64_t offset_in, int fd_out, std::int64_t offset_out,
                        std::size_t length, unsigned flags);

  // madvise(2) on a kernel worker (MADV_POPULATE_READ may read from disk).
  awaitable<int> madvise(void* address, std::size_t length, int advice);

  // Waits until `fd` is ready for `events` (POLLIN, POLLOUT); returns the ready mask.
  // Splices on a non-blocking socket answer -EAGAIN instead of waiting.
  awaitable<int> poll(int fd, unsigned events);

  std::size_t in_flight() const { return in_flight_; }

 private:
  // What a CQE's user data points to. complete() takes one completion; it returns true
  // once the operation is over, having posted its handler (or dropped it, when `run`
  // is false: the ring shutting down) and freed itself.
  struct Operation {
    virtual ~Operation() = default;
    virtual bool complete(int result, bool run) = 0;
  };
  template <class Handler>
  struct HandlerOperation;
  struct ChainOperation;

  void shutdown() override;

  // Prepares one SQE with `prepare`, submits it, and resumes the caller with the result.
  template <class Prepare>
  awaitable<int> submit(Prepare prepare);
  io_uring_sqe* next_sqe();
  void start(Operation* operation, io_uring_sqe* sqe);
  void submit_queued();
  void start_chain(ChainOperation* chain, int fd, std::span<const ChainedWrite> writes, bool offload);
  void wait_for_completions();
  void reap();

  io_uring ring_{};
  bool ring_ready_ = false;
  int eventfd_ = -1;
  asio::posix::stream_descriptor wakeups_;
  std::uint64_t wakeup_count_ = 0;
  bool waiting_ = false;
  std::size_t in_flight_ = 0;
};

template <class Handler>
struct FileRing::HandlerOperation final : FileRing::Operation {
  explicit HandlerOperation(Handler h) : handler(std::move(h)) {}
  bool complete(int result, bool run) override {
    if (run) {
      auto ex = asio::get_associated_executor(handler);
      asio::post(ex, [h = std::move(handler), result]() mutable { std::move(h)(result); });
    }
    delete this;
    return true;
  }
  Handler handler;
};

// A chain's links share one operation, each SQE pointing at its own link. Where the
// kernel has IOSQE_CQE_SKIP_SUCCESS, every link but the last carries it, and a chain
// posts exactly one completion: the last link's when all succeeded, or the first
// failing link's, after which the kernel cancels the rest without posting (a failed
// request that skipped its success also skips its followers'). The links before it
// succeeded; those after it were never made. Without the flag every link posts.
struct FileRing::ChainOperation {
  struct Link final : Operation {
    bool complete(int result, bool run) override { return chain->link_done(index, result, run); }
    ChainOperation* chain = nullptr;
    std::size_t index = 0;
  };

  void resume() { caller->post(); }

  bool link_done(std::size_t index, int result, bool run) {
    results[index] = result;
    if (silent_successes) {
      for (std::size_t after = index + 1; after < links.size(); ++after) results[after] = -ECANCELED;
    } else if (++received < links.size()) {
      return false;
    }
    if (run) resume();
    delete this;
    return true;
  }

  std::unique_ptr<ParkedHandler> caller;
  std::span<int> results;  // set to each write's length beforehand: a silent link's result
  std::vector<Link> links;
  bool silent_successes = false;
  std::size_t received = 0;
};

template <class Prepare>
awaitable<int> FileRing::submit(Prepare prepare) {
  return asio::async_initiate<decltype(asio::use_awaitable), void(int)>(
      [this, prepare](auto handler) {
        auto* operation = new HandlerOperation<decltype(handler)>(std::move(handler));
        io_uring_sqe* sqe = next_sqe();
        if (sqe == nullptr) {
          operation->complete(-EBUSY, true);
          return;
        }
        prepare(sqe);
        start(operation, sqe);
      },
      asio::use_awaitable);
}

// Moves `length` bytes from a file at `offset` to a socket through `pipe`, never
// copying them into this process. `lead` (a frame's header, at most
// Pipe::lead_limit() bytes) is copied into the pipe first and leaves in the same
// splice as the payload's first pipeful, not in a write of its own. `more` keeps the
// socket corked after the last byte (more data is known to follow).
awaitable<Status> splice_file_to_socket(FileRing& ring, class Pipe& pipe, int file, std::uint64_t offset,
                                        std::uint64_t length, int socket, bool more,
                                        std::span<const std::byte> lead = {});

// The error for a source file that ended before `offset`, which its size promised:
// it shrank while being copied. One wording for every way of reading it.
tl::unexpected<Error> fail_source_shrank(std::uint64_t offset);

// Moves [offset, offset + length) of a file into a pipe (its write end) with room for
// all of it. The file ending first is an error: the source shrank.
awaitable<Status> splice_file_to_pipe(FileRing& ring, int file, std::uint64_t offset, int pipe, std::size_t length);

// Moves the `length` bytes waiting in a pipe (its read end) into a file at `offset`.
awaitable<Status> splice_pipe_to_file(FileRing& ring, int pipe, int file, std::uint64_t offset, std::size_t length);

// The same move made at once on the calling thread, for a file on tmpfs or ramfs only.
// io_uring has no non-blocking splice: it hands every one to a worker thread, and for
// a file that is memory the hand-off there and back costs more than the copy
// (docs/benchmarks.md, section "The NBD server's writes into tmpfs"). Any other
// file's write can wait on its device or on writeback throttling,
// which on the loop's thread would stall every connection it serves.
Status splice_pipe_to_memory_file(int pipe, int file, std::uint64_t offset, std::size_t length);

// Sends the `length` bytes waiting in a pipe (its read end) to a socket.
awaitable<Status> splice_pipe_to_socket(FileRing& ring, int pipe, std::size_t length, int socket, bool more);

// Moves at most `length` bytes (what has arrived, at least one) from a socket into an
// empty pipe; 0 when the peer closed the connection, -errno on failure.
awaitable<int> splice_socket_to_pipe(FileRing& ring, int socket, class Pipe& pipe, std::size_t length);

// Moves `length` bytes from a socket into a file at `offset` through `pipe`: one
// copy (into the page cache) instead of two. The peer closing first is an error.
awaitable<Status> splice_socket_to_file(FileRing& ring, class Pipe& pipe, int socket, int file,
                                        std::uint64_t offset, std::uint64_t length);

// Helpers that turn a FileRing result into a Status naming the operation and offset.
awaitable<Status> ring_read_exactly(FileRing& ring, int fd, std::uint64_t offset, std::span<std::byte> into,
                                    bool offload);
awaitable<Status> ring_write_all(FileRing& ring, int fd, std::uint64_t offset, std::span<const std::byte> from,
                                 bool offload);

}  // namespace sluice
