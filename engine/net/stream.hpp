// Stream: a connected byte stream (TCP or Unix socket, plain or TLS) as the protocol
// code sees it.
//
// Writing is by frames: a header and a payload. Frames leave in the order send() was
// called, gathered into as few socket writes as possible (and, with TLS, as few records
// as possible). There is no writer coroutine of its own: the first sender to find the
// stream idle writes every frame queued meanwhile (group commit), so nothing outlives
// the callers and no lock is needed. Reading is for one reader at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <string>

#include "engine/asio.hpp"
#include "engine/completion.hpp"
#include "engine/error.hpp"
#include "engine/file_slice.hpp"
#include "engine/net/tcp_cork.hpp"

namespace sluice {

// Payload already waiting in a pipe (a file's bytes spliced into it): the stream
// splices it on to the socket. The pipe is empty once send() has completed.
struct PipedBytes {
  int fd = -1;  // the pipe's read end
  std::size_t length = 0;
};

struct Frame {
  // `head` may lie directly in front of `body` (a header in a buffer's headroom); the
  // stream then sends them as one contiguous span.
  std::span<const std::byte> head;
  std::span<const std::byte> body;
  // Instead of `body`, on streams where splices() is true.
  FileSlice file{};
  PipedBytes piped{};

  std::size_t size() const {
    return head.size() + body.size() + static_cast<std::size_t>(file.length) + piped.length;
  }
  bool contiguous() const { return head.empty() || head.data() + head.size() == body.data() || body.empty(); }
};

struct StreamStats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t socket_writes = 0;  // send calls issued
  std::uint64_t tls_records = 0;    // records written (TLS only)
  std::uint64_t tls_record_bytes = 0;
  std::uint64_t tcp_segments = 0;   // data segments sent (TCP_INFO), 0 if unknown
  std::string tls_cipher;           // the negotiated suite, e.g. TLS_AES_128_GCM_SHA256 (TLS only)
};

struct StreamOptions {
  bool nodelay = true;            // TCP_NODELAY; Sluice batches itself
  // TCP: a send buffer fitted to the path's round trip (net/send_buffer.hpp) rather
  // than the kernel's autotuned one. Off by default: the NBD client turns it on, where
  // it was measured; the Chunked and raw senders keep the kernel's sizing, with which
  // their socket-write and segment figures were taken.
  bool fit_send_buffer = false;
  std::size_t batch_bytes = 1u << 20;  // most bytes one gathered write carries
  // A gathered write the peer takes none of for this long fails, and the stream is
  // aborted: a receiver that stopped reading must not hang the sender (0: wait forever).
  std::chrono::seconds stall_timeout{0};
};

class Stream {
 public:
  virtual ~Stream() = default;

  // Queues `frame` and completes once all of its bytes have been handed to the kernel.
  // The spans must stay valid until then.
  awaitable<Status> send(Frame frame);

  // Reads exactly into.size() bytes. The peer closing first is an error.
  virtual awaitable<Status> read_exactly(std::span<std::byte> into) = 0;
  // Reads what is available (at least one byte); 0 means the peer closed cleanly.
  virtual awaitable<Result<std::size_t>> read_some(std::span<std::byte> into) = 0;
  // Waits for input and copies what has arrived without taking it: the next read
  // returns it again. 0 at the end of the stream, and always where the stream cannot
  // look ahead (TLS, whose bytes must go through the decryption).
  virtual awaitable<Result<std::size_t>> peek_some(std::span<std::byte> into) {
    (void)into;
    co_return std::size_t{0};
  }

  // Ends the stream cleanly (TLS close_notify, shutdown of the write side) and closes
  // it. Call it once every send() has completed: frames still queued are not sent.
  virtual awaitable<Status> close() = 0;
  // Fails every pending operation promptly and closes the socket.
  virtual void abort() = 0;
  // Ends the connection as a failure its peer can tell from close(): a one-way
  // receiver has no other way to say it did not take the stream. Call it with no
  // operation pending.
  virtual void reset() { abort(); }
  // Says this end will send nothing more, where that costs the peer nothing: a FIN on
  // a plain socket, after the last frame. Not over TLS, whose close_notify is data a
  // receiver that never reads it again would reset the connection over.
  virtual void finish_sending() {}
  // Wakes pending reads (they see the end of the stream) without a word to the peer,
  // which abort() sends (a FIN, that a one-way sender would read as success); for a
  // receiver that gives up and will reset() the connection next.
  virtual void stop_receiving() { abort(); }

  virtual StreamStats stats() const = 0;
  virtual bool is_tls() const = 0;
  // Whether frames may carry a FileSlice or PipedBytes, and the socket is there to
  // splice to.
  virtual bool splices() const { return false; }
  virtual int socket_fd() const { return -1; }
  // "tcp 127.0.0.1:10809", "unix /run/x.sock", for messages.
  virtual std::string peer() const = 0;

 protected:
  struct Pending {
    Frame frame;
    Completion* done;
  };
  // Writes a batch taken from the front of the queue. `more` says whether more frames
  // are already queued behind it (MSG_MORE is allowed only then).
  virtual awaitable<Status> transmit(std::span<const Pending> batch, bool more) = 0;
  virtual std::size_t batch_bytes() const = 0;
  // How many frames may go into one transmit() call.
  virtual std::size_t batch_frames() const = 0;
  virtual std::chrono::seconds stall_timeout() const { return {}; }
  // The socket's cork, where it has one: held while frames are queued behind the batch
  // being sent, released by the batch that ends the burst.
  virtual TcpCork* cork() { return nullptr; }

  // Fails everything queued (used by abort()).
  void fail_pending(const Error& error);

 private:
  awaitable<void> write_queued();
  // transmit(), failed with a timeout if the peer takes nothing for stall_timeout().
  awaitable<Status> transmit_bounded(std::span<const Pending> batch, bool more);

  std::deque<Pending> queue_;
  bool writing_ = false;
};

}  // namespace sluice
