// StreamReader: reads a protocol's input from a Stream with few system calls and few
// copies. Small reads (headers) are served from a read-ahead buffer; a large read
// (a payload) first drains what is buffered and then reads straight into the
// caller's memory, so payload bytes land in the pooled buffer that is written to
// storage without another copy.
#pragma once

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
  // Stops reading ahead: each read asks the stream for no more than it needs, so a
  // caller can splice payloads from the socket itself. What is buffered stays.
  void stop_read_ahead() { read_ahead_ = false; }
  // `n` bytes were taken from the stream without this reader (spliced).
  void advance(std::size_t n) { position_ += n; }
  Stream& stream() { return stream_; }

 private:
  Stream& stream_;
  std::vector<std::byte> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t position_ = 0;
  bool read_ahead_ = true;
};

}  // namespace sluice
