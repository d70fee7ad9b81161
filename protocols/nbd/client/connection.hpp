// Connection: the transmission phase of one NBD connection.
//
// Requests are issued by any number of coroutines at once. Each request lives in its
// issuer's frame: it is registered under a fresh cookie, leaves through the Stream as
// one frame (a WRITE's header sits in the payload buffer's headroom, so header and data
// go out as one contiguous span, one TLS record), and its issuer then waits on its
// Completion. One reply-reader coroutine reads every reply, in whatever order the
// server sends them, and completes the request whose cookie it carries. READ data is
// read straight into the issuer's span at the offset each chunk names.
//
// Whatever breaks the connection (a dropped socket, a bad magic, an unknown cookie, a
// malformed chunk, the server going silent for `timeout` while requests are pending,
// abort()) fails every request in flight, each with an error naming its own command
// and offset, and every later request at once. A server's error reply fails only its
// request.
//
// The reader (and the watchdog) run in a TaskGroup the connection owns; disconnect()
// waits for them, so nothing outlives the connection. It must be awaited before the
// connection is destroyed once start() has been called.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/buffer.hpp"
#include "engine/completion.hpp"
#include "engine/error.hpp"
#include "engine/extent.hpp"
#include "engine/net/stream.hpp"
#include "engine/task_group.hpp"
#include "protocols/nbd/client/negotiated_export.hpp"
#include "protocols/nbd/reply_assembler.hpp"
#include "protocols/nbd/transmission_messages.hpp"

namespace sluice::nbd {

class Connection {
 public:
  Connection(executor ex, std::unique_ptr<Stream> stream, NegotiatedExport facts,
             std::chrono::seconds timeout = std::chrono::seconds{0});
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Starts the reply reader, and the watchdog when there is a timeout.
  void start();

  const NegotiatedExport& facts() const { return facts_; }
  const std::string& peer() const { return peer_; }
  std::size_t in_flight() const { return pending_.size(); }
  // Why the connection is unusable, if it is.
  const std::optional<Error>& failure() const { return failure_; }

  // Fills `into` with the bytes at `offset`.
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into);
  // Writes `data` at `offset`. The buffer is released as soon as its bytes are in the
  // kernel (its pool can refill it while the server works); the call completes with the
  // server's reply.
  awaitable<Status> write(std::uint64_t offset, Buffer data, std::uint16_t flags = 0);
  // Writes `data` for a caller on another loop, which keeps the memory valid until
  // `sent` is called (on this connection's loop) once the bytes are in the kernel, as
  // the Buffer overload releases its buffer then. `header_room`, when not empty, is
  // the request_header_size bytes right in front of `data`, free for the header.
  awaitable<Status> write_lent(std::uint64_t offset, std::span<const std::byte> data,
                               std::span<std::byte> header_room, std::function<void()> sent,
                               std::uint16_t flags = 0);
  // Writes bytes the caller keeps valid until completion (shared zeros).
  awaitable<Status> write(std::uint64_t offset, std::span<const std::byte> data, std::uint16_t flags = 0);
  // A WRITE whose payload is spliced from a file (only where splices() is true).
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice, std::uint16_t flags);
  // Whether the connection is a plain socket that can splice payload from files.
  bool splices() const { return stream_->splices(); }
  awaitable<Status> write_zeroes(std::uint64_t offset, std::uint32_t length, std::uint16_t flags);
  // base:allocation from `offset`; the server may describe less or more than `length`.
  awaitable<Result<std::vector<Extent>>> block_status(std::uint64_t offset, std::uint32_t length);
  awaitable<Status> flush();

  // Ends the session: DISC and a clean close when the connection is healthy, otherwise
  // just the close; then waits for the reader and the watchdog. Requests still in
  // flight fail. Idempotent; never fails (what was lost, the requests reported).
  awaitable<void> disconnect();
  // Fails every request in flight with a cancellation and shuts the stream down at
  // once; disconnect() then waits for the rest.
  void abort();

  StreamStats stats() const { return stream_->stats(); }

 private:
  struct Request {
    Request(executor ex, Command command, std::uint64_t offset, std::uint32_t length, std::uint16_t flags = 0);
    RequestHeader header;
    std::span<std::byte> into;                      // READ: where the data goes
    std::optional<ReadReplyAssembler> assembler;    // READ with structured replies
    std::vector<Extent> extents;                    // BLOCK_STATUS
    bool got_extents = false;
    std::optional<Error> error;                     // an error chunk, until DONE
    Completion done;
  };
  using clock = std::chrono::steady_clock;

  // Registers `request` and sends its header (in `head`) and `body` as one frame.
  awaitable<void> send(Request& request, std::span<std::byte, request_header_size> head, FileSlice file,
                       std::span<const std::byte> body);
  awaitable<Status> send_and_wait(Request& request);
  std::string describe(const Request& request) const;
  Error request_error(const Request& request, const Error& cause) const;
  Error server_error(const Request& request, Errno error, const std::string& message) const;
  // Removes the request from the table and completes it.
  void complete(std::uint64_t cookie, Status status);
  // After the reader has finished with the request in hand: completes it if a failure
  // came meanwhile (fail() leaves it to the reader, see in_hand_), then the requests
  // that failed with it.
  void settle_in_hand();
  // The connection is unusable: every pending request fails with `cause`.
  void fail(Error cause);
  void stop_watchdog();

  // reply_reader.cpp
  awaitable<Status> read_replies();
  awaitable<Status> on_simple_reply(std::span<const std::byte> head);
  awaitable<Status> on_chunk(std::span<std::byte> head);
  awaitable<Status> on_read_chunk(Request& request, const ChunkHeader& header);
  awaitable<Status> on_block_status_chunk(Request& request, const ChunkHeader& header);
  awaitable<Status> on_other_chunk(Request& request, const ChunkHeader& header);
  awaitable<Result<ErrorChunk>> read_error_chunk(const ChunkHeader& header);
  awaitable<Status> read_data(std::span<std::byte> into);
  awaitable<Status> read_exactly(std::span<std::byte> into);
  Request* find(std::uint64_t cookie);
  Error violation(const std::string& what) const;
  void lost(const Error& error);

  awaitable<Status> watch();

  executor ex_;
  std::unique_ptr<Stream> stream_;
  NegotiatedExport facts_;
  std::string peer_;
  std::chrono::seconds timeout_;
  std::uint64_t next_cookie_ = 1;
  // Ordered by cookie, so a failure reports the oldest request first.
  std::map<std::uint64_t, Request*> pending_;
  std::optional<Error> failure_;
  // The request whose reply the reader is handling across a co_await (reading data
  // into its span, a chunk's payload for it). A failure must not complete it there and
  // then: its issuer would free the span while the read into it is still in progress.
  // fail() marks it instead, and the reader completes it once its read has returned.
  Request* in_hand_ = nullptr;
  bool in_hand_failed_ = false;
  // Failed along with the one in hand, completed right after it (oldest first).
  std::vector<Request*> behind_in_hand_;
  bool disconnecting_ = false;
  bool stopping_ = false;
  clock::time_point last_progress_;
  std::uint64_t bytes_sent_seen_ = 0;  // the stream's count at the watchdog's last look
  asio::steady_timer watchdog_;
  TaskGroup tasks_;
};

}  // namespace sluice::nbd
