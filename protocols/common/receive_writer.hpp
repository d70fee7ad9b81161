// ReceiveWriter: the storage half of a receiver (Chunked or raw). The network half
// parses headers and asks it to receive each payload; the payload is read into a
// buffer from a pool, or, from a plain socket into a file, spliced into a pipe from a
// pool (one copy instead of two). Its write runs in the background, several at once,
// and the buffer or pipe returns to its pool only when the write has completed, so
// the pool's size bounds both memory and writes in flight.
//
// Writes whose ranges could overlap never run at the same time: a chunk that does not
// lie wholly past everything issued so far waits until the writes in flight are done,
// so the last chunk sent for a range is the one that stays (as with vhd-tool's
// one-write-at-a-time receiver).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "engine/buffer_pool.hpp"
#include "engine/copy_options.hpp"
#include "engine/destination.hpp"
#include "engine/task_group.hpp"
#include "engine/uring/pipe_pool.hpp"
#include "protocols/common/stream_reader.hpp"

namespace sluice {

struct ReceiveOptions {
  static constexpr std::size_t default_depth = 8;
  static constexpr std::size_t default_piece = 2u << 20;

  // Bytes the image holds: --size, or the output's size. Nothing is written past it.
  std::uint64_t image_size = 0;
  // Writes in flight (and pooled buffers).
  std::size_t depth = default_depth;
  // Raw: bytes per write. Chunked: the longest chunk accepted.
  std::size_t piece = default_piece;
  // After each completed write, on the event loop's thread.
  ProgressCallback progress;
  // Splice payloads from a plain socket into the output where it can take them
  // (serve --no-zero-copy turns it off).
  bool zero_copy = true;
  // How long to wait after the image's last byte (raw) or the end marker (Chunked) for
  // the end of the stream; a byte instead fails the transfer (a larger image, or not
  // the stream the sender meant). Such bytes sit right behind, in the socket or a
  // round trip away; a
  // sender that keeps the connection open until the receiver closes (a TLS sender
  // does) costs this much per transfer.
  std::chrono::milliseconds trailing_grace{250};
};

struct ReceiveResult {
  std::uint64_t bytes_received = 0;  // payload bytes read from the stream
  std::uint64_t bytes_written = 0;   // bytes written to the destination (within the image)
  std::uint64_t writes = 0;
  double seconds = 0;
};

class ReceiveWriter {
 public:
  // Payloads come from `reader`. When a write fails the reader's stream is aborted,
  // since the sender cannot be told in any other way.
  ReceiveWriter(executor ex, Destination& destination, const ReceiveOptions& options, StreamReader& reader);

  // Receives the next `length` payload bytes and starts writing them at `offset`.
  // Returns how many arrived: fewer than `length` only when the stream ended.
  awaitable<Result<std::size_t>> receive(std::uint64_t offset, std::size_t length);

  // A buffer of options.piece bytes; waits while every buffer is in flight. Fails once
  // a write has failed.
  awaitable<Result<Buffer>> acquire();

  // Starts writing `data` at `offset` (waiting first if it could overlap a write in
  // flight). Fails when a write has already failed.
  awaitable<Status> write(std::uint64_t offset, Buffer data);

  // Waits for every write; the first write error, if any.
  awaitable<Status> drain();

  // drain(), then flush to stable storage and finish the destination. Success means
  // every byte written is durable.
  awaitable<Result<ReceiveResult>> finish(std::uint64_t bytes_received);

  // The first write error, once drained or as soon as known.
  bool failed() const { return writes_.failed(); }

 private:
  awaitable<Result<std::size_t>> receive_buffered(std::uint64_t offset, std::size_t length);
  awaitable<Result<std::size_t>> receive_spliced(std::uint64_t offset, std::size_t length);
  // Waits for the writes in flight when [offset, offset + length) could overlap one.
  awaitable<Status> order_after_overlaps(std::uint64_t offset, std::uint64_t length);
  awaitable<Status> write_one(std::uint64_t offset, Buffer data);
  awaitable<Status> write_piped(std::uint64_t offset, std::size_t length, Pipe* pipe);
  awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t length, Pipe* pipe);
  void completed(std::uint64_t length);

  Destination& destination_;
  StreamReader& reader_;
  bool splicing_ = false;
  ReceiveOptions options_;
  BufferPool pool_;
  PipePool pipes_;
  TaskGroup writes_;
  std::uint64_t issued_end_ = 0;  // the end of the highest range issued since the last drain
  std::uint64_t done_ = 0;
  std::uint64_t writes_issued_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace sluice
