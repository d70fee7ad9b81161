#include "protocols/nbd/server/request_reader.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/uring/file_ring.hpp"

namespace sluice::nbd {

namespace {
// A remaining payload at least this large is received in place rather than staged.
constexpr std::size_t direct_threshold = 16 * 1024;
}  // namespace

RequestReader::RequestReader(Stream& stream, std::size_t staging) : stream_(stream), staging_(staging) {}

awaitable<Result<bool>> RequestReader::fill() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (end_ == staging_.size()) {
    std::memmove(staging_.data(), staging_.data() + begin_, staged());
    end_ -= begin_;
    begin_ = 0;
  }
  auto n = co_await stream_.read_some(std::span(staging_).subspan(end_));
  if (!n) co_return tl::unexpected(n.error());
  end_ += *n;
  co_return *n > 0;
}

awaitable<Result<std::optional<RequestHeader>>> RequestReader::next() {
  while (staged() < request_header_size) {
    auto more = co_await fill();
    if (!more) co_return tl::unexpected(more.error());
    if (!*more) {
      if (staged() == 0) co_return std::nullopt;
      co_return fail(std::errc::connection_reset, stream_.peer() + " closed the connection inside a request header (" +
                                                      std::to_string(staged()) + " of 28 bytes)");
    }
  }
  auto header = decode_request_header(std::span(staging_).subspan(begin_, request_header_size));
  if (!header) co_return tl::unexpected(header.error());
  begin_ += request_header_size;
  co_return *header;
}

awaitable<Status> RequestReader::payload(std::span<std::byte> into) {
  std::size_t done = std::min(staged(), into.size());
  std::memcpy(into.data(), staging_.data() + begin_, done);
  begin_ += done;
  while (done < into.size()) {
    const std::size_t rest = into.size() - done;
    if (rest >= direct_threshold) {
      if (Status got = co_await stream_.read_exactly(into.subspan(done)); !got) co_return got;
      co_return Status{};
    }
    auto more = co_await fill();
    if (!more) co_return tl::unexpected(more.error());
    if (!*more)
      co_return fail(std::errc::connection_reset, stream_.peer() + " closed the connection inside a WRITE payload");
    std::size_t n = std::min(staged(), rest);
    std::memcpy(into.data() + done, staging_.data() + begin_, n);
    begin_ += n;
    done += n;
  }
  co_return Status{};
}

awaitable<Result<std::size_t>> RequestReader::payload_to_pipe(const Pipe& pipe, std::size_t length) {
  // What came in with the header goes first, copied (at most the staging buffer).
  std::size_t done = std::min(staged(), length);
  if (Status put = pipe.put(std::span(staging_).subspan(begin_, done)); !put) co_return tl::unexpected(put.error());
  begin_ += done;
  const int socket = stream_.socket_fd();
  FileRing& ring = FileRing::of(co_await asio::this_coro::executor);
  bool retried_with_bytes_waiting = false;
  while (done < length) {
    ssize_t n = ::splice(socket, nullptr, pipe.write_end(), nullptr, length - done, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      retried_with_bytes_waiting = false;
      continue;
    }
    if (n == 0)
      co_return fail(std::errc::connection_reset, stream_.peer() + " closed the connection inside a WRITE payload");
    if (errno == EINTR) continue;
    if (errno != EAGAIN)
      co_return fail(errno_code(errno), "receiving from " + stream_.peer() + ": " + errno_code(errno).message());
    // Either the socket was empty or the pipe is full. Bytes waiting in the socket
    // tell which only on a second look: they may have arrived just after the splice
    // found none, and taking that for a full pipe sent payloads to memory needlessly.
    int waiting = 0;
    if (::ioctl(socket, FIONREAD, &waiting) == 0 && waiting > 0) {
      if (retried_with_bytes_waiting) co_return done;
      retried_with_bytes_waiting = true;
      continue;
    }
    int ready = co_await ring.poll(socket, POLLIN);
    if (ready < 0)
      co_return fail(errno_code(-ready), "waiting for " + stream_.peer() + ": " + errno_code(-ready).message());
  }
  co_return done;
}

awaitable<Status> RequestReader::skip(std::uint64_t length) {
  while (length > 0) {
    if (staged() == 0) {
      auto more = co_await fill();
      if (!more) co_return tl::unexpected(more.error());
      if (!*more)
        co_return fail(std::errc::connection_reset, stream_.peer() + " closed the connection inside a WRITE payload");
    }
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(staged(), length));
    begin_ += n;
    length -= n;
  }
  co_return Status{};
}

}  // namespace sluice::nbd
