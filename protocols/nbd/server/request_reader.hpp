// RequestReader: reads NBD requests off a stream with as few receive calls as it can.
//
// Small messages (28-byte headers, small WRITE payloads) come out of one staging
// buffer that each receive fills as far as the socket allows, so a burst of requests
// costs one receive, not two per request. A large WRITE payload goes straight from
// the socket into its own buffer after what was already staged is copied over: no
// second copy of the bulk of the data. The staging buffer is small (16 KiB) for that
// reason: whatever a receive stages beyond a WRITE header is payload copied twice
// (64 KiB staged meant a quarter of every 256 KiB WRITE copied twice).
//
// On a plain socket a WRITE payload can instead be spliced into a pipe (socket ->
// pipe moves page references, no copy) for the image to splice on into its file. The
// splices are made here, on the event loop, without blocking: each moves what the
// socket holds at once, and the loop waits for more with a poll. (Through io_uring a
// splice always runs on a kernel worker thread; two such trips per WRITE cost more
// than the copy they saved.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/stream.hpp"
#include "engine/uring/pipe.hpp"
#include "protocols/nbd/transmission_messages.hpp"

namespace sluice::nbd {

class RequestReader {
 public:
  explicit RequestReader(Stream& stream, std::size_t staging = 16 * 1024);

  // The next request header; nothing when the client closed the connection cleanly
  // between requests. A bad magic or a connection lost mid-request is an error.
  awaitable<Result<std::optional<RequestHeader>>> next();
  // The `into.size()` payload bytes that follow the header.
  awaitable<Status> payload(std::span<std::byte> into);
  // Reads and drops `length` payload bytes (a refused WRITE).
  awaitable<Status> skip(std::uint64_t length);
  // Moves up to `length` payload bytes into an empty pipe of at least `length` bytes'
  // capacity, on a stream whose socket_fd() is a non-blocking socket (SocketStream's).
  // Returns how many it moved: fewer than `length` when the pipe filled up first
  // (socket data arrives in fragments, each taking a whole slot of the pipe), and the
  // caller then receives the rest with payload().
  awaitable<Result<std::size_t>> payload_to_pipe(const Pipe& pipe, std::size_t length);

 private:
  std::size_t staged() const { return end_ - begin_; }
  // Receives more into the staging buffer (at least one byte); false on a clean end.
  awaitable<Result<bool>> fill();

  Stream& stream_;
  std::vector<std::byte> staging_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace sluice::nbd
