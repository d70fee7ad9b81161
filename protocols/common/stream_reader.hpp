// StreamReader: reads a protocol's input from a Stream with few system calls and few
// copies. Small reads (headers) are served from a read-ahead buffer; a large read
// (a payload) first drains what is buffered and then reads straight into the
// caller's memory, so payload bytes land in the pooled buffer that is written to
// storage without another copy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/stream.hpp"

namespace sluice {

class StreamReader {
 public:
  static constexpr std::size_t default_read_ahead = 16 * 1024;

  explicit StreamReader(Stream& stream, std::size_t read_ahead = default_read_ahead);

  // Fills `into`; returns how many bytes arrived before the peer closed the stream,
  // which is into.size() unless the stream ended first.
  awaitable<Result<std::size_t>> read_up_to(std::span<std::byte> into);

  // The buffered bytes, reading more first when there are none; empty at the end of
  // the stream. Take some with consume(); the rest stays for the next read.
  awaitable<Result<std::span<const std::byte>>> peek();
  void consume(std::size_t n);

  // Bytes taken out of the reader so far (consumed, returned by read_up_to, or
  // taken from the stream directly and reported with advance()).
  std::uint64_t position() const { return position_; }
  // Bytes read from the stream and not yet taken.
  std::size_t buffered() const { return end_ - begin_; }
  // Bytes that have arrived from the stream so far, counted as each read returns: a
  // payload read straight into the caller's memory counts while it is still filling
  // (what IdleWatch needs to tell a slow sender from a silent one).
  std::uint64_t received() const { return received_; }
  // When the last of them arrived (the reader's creation before any did).
  std::chrono::steady_clock::time_point last_arrival() const { return last_arrival_; }
  // Stops reading ahead: each read asks the stream for no more than it needs, so a
  // caller can splice payloads from the socket itself. What is buffered stays.
  void stop_read_ahead() { read_ahead_ = false; }
  // `n` bytes were taken from the stream without this reader (spliced).
  void advance(std::size_t n) {
    position_ += n;
    arrived(n);
  }
  Stream& stream() { return stream_; }

 private:
  void arrived(std::size_t n) {
    received_ += n;
    last_arrival_ = std::chrono::steady_clock::now();
  }

  Stream& stream_;
  std::vector<std::byte> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t position_ = 0;
  std::uint64_t received_ = 0;
  std::chrono::steady_clock::time_point last_arrival_ = std::chrono::steady_clock::now();
  bool read_ahead_ = true;
};

}  // namespace sluice
