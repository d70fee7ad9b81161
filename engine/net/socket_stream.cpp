#include "engine/net/socket_stream.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <asio/read.hpp>
#include <array>
#include <vector>

#include "engine/net/hard_close.hpp"
#include "engine/net/send_buffer.hpp"
#include "engine/net/tcp_info.hpp"
#include "engine/uring/file_ring.hpp"

namespace sluice {

std::string describe_peer(Socket& socket) {
  asio::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "socket";
  const sockaddr* sa = endpoint.data();
  char text[INET6_ADDRSTRLEN] = {};
  switch (sa->sa_family) {
    case AF_INET: {
      auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      return std::string("tcp ") + text + ":" + std::to_string(ntohs(in->sin_port));
    }
    case AF_INET6: {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
      return std::string("tcp [") + text + "]:" + std::to_string(ntohs(in6->sin6_port));
    }
    case AF_UNIX: {
      auto* un = reinterpret_cast<const sockaddr_un*>(sa);
      std::size_t len = endpoint.size() > offsetof(sockaddr_un, sun_path) ? endpoint.size() - offsetof(sockaddr_un, sun_path) : 0;
      std::string path(un->sun_path, strnlen(un->sun_path, len));
      if (!path.empty()) return "unix " + path;
      // An accepted connection's peer has no name: its process tells one client from
      // another in a server's log.
      ucred cred{};
      socklen_t cred_size = sizeof cred;
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_size) == 0 && cred.pid > 0)
        return "unix socket (pid " + std::to_string(cred.pid) + ", uid " + std::to_string(cred.uid) + ")";
      return "unix socket";
    }
    default: return "socket";
  }
}

void apply_socket_options(Socket& socket, const StreamOptions& options) {
  asio::error_code ec;
  auto local = socket.local_endpoint(ec);
  if (ec) return;
  int family = local.data()->sa_family;
  if (family == AF_INET || family == AF_INET6) {
    int on = options.nodelay ? 1 : 0;
    ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (options.fit_send_buffer) fit_send_buffer(socket.native_handle());
  }
  // Splices made on the loop thread itself (the NBD server's WRITE payloads) must never
  // block it, and on TCP only the socket's own O_NONBLOCK makes a splice from it return
  // EAGAIN (SPLICE_F_NONBLOCK covers the pipe). io_uring splices then answer EAGAIN
  // too and wait with a poll (splice_waiting). Set with fcntl, not Asio's
  // non_blocking(), which would move Asio's own operations from io_uring to
  // poll-then-syscall; they already cope with a descriptor that is non-blocking.
  const int fd = socket.native_handle();
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

awaitable<Status> send_all(Socket& socket, std::vector<asio::const_buffer> buffers, bool more,
                           StreamStats& stats, const std::string& peer) {
  const int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
  std::size_t first = 0;
  while (first < buffers.size()) {
    auto pending = std::span<const asio::const_buffer>(buffers).subspan(first);
    auto [ec, n] = co_await socket.async_send(pending, flags, use_nothrow);
    ++stats.socket_writes;
    if (ec) co_return fail(ec, "sending to " + peer + ": " + ec.message());
    stats.bytes_sent += n;
    // Drop what went out; a short send leaves a partial buffer at the front.
    while (n > 0 && first < buffers.size()) {
      std::size_t take = std::min(n, buffers[first].size());
      buffers[first] += take;
      n -= take;
      if (buffers[first].size() == 0) ++first;
    }
    while (first < buffers.size() && buffers[first].size() == 0) ++first;
  }
  co_return Status{};
}

awaitable<Status> receive_exactly(Socket& socket, std::span<std::byte> into, const std::string& peer) {
  auto [ec, n] = co_await asio::async_read(socket, asio::buffer(into.data(), into.size()), use_nothrow);
  if (ec == asio::error::eof)
    co_return fail(std::errc::connection_reset,
                   peer + " closed the connection (" + std::to_string(n) + " of " +
                       std::to_string(into.size()) + " bytes read)");
  if (ec) co_return fail(ec, "receiving from " + peer + ": " + ec.message());
  co_return Status{};
}

SocketStream::SocketStream(Socket socket, StreamOptions options)
    : socket_(std::move(socket)), options_(options), cork_(socket_.native_handle()), peer_(describe_peer(socket_)) {
  apply_socket_options(socket_, options_);
}

SocketStream::~SocketStream() {
  asio::error_code ignored;
  socket_.close(ignored);
}

awaitable<Status> SocketStream::send_memory(std::vector<asio::const_buffer>& buffers, bool more) {
  if (buffers.empty()) co_return Status{};
  Status s = co_await send_all(socket_, std::move(buffers), more, stats_, peer_);
  buffers.clear();
  co_return s;
}

namespace {
// Headers that ride in a splice's pipe: an NBD request's 28 bytes or a Chunked header's
// 12, with room for a few small frames gathered before them.
constexpr std::size_t lead_capacity = 512;

std::size_t gathered_size(const std::vector<asio::const_buffer>& buffers) {
  std::size_t total = 0;
  for (const auto& b : buffers) total += b.size();
  return total;
}
}  // namespace

awaitable<Status> SocketStream::transmit(std::span<const Pending> batch, bool more) {
  // Memory frames are gathered into one sendmsg. A frame whose payload stays in a file
  // is spliced, corked, with its header ahead of it in the pipe (one write for both);
  // a frame whose payload waits in a pipe already sends what was gathered first. The
  // cork is released with the burst's end (Stream::write_queued).
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(batch.size() * 2);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Frame& f = batch[i].frame;
    const std::size_t own_from = buffers.size();  // this frame's own memory from here on
    if (f.contiguous() && !f.head.empty() && !f.body.empty()) {
      buffers.emplace_back(f.head.data(), f.head.size() + f.body.size());
    } else {
      if (!f.head.empty()) buffers.emplace_back(f.head.data(), f.head.size());
      if (!f.body.empty()) buffers.emplace_back(f.body.data(), f.body.size());
    }
    if (f.file.length == 0 && f.piped.length == 0) continue;
    cork_.hold();
    bool last = i + 1 == batch.size();
    if (f.piped.length > 0) {
      if (Status s = co_await send_memory(buffers, true); !s) co_return s;
      Status s = co_await splice_pipe_to_socket(FileRing::of(socket_.get_executor()), f.piped.fd, f.piped.length,
                                                socket_.native_handle(), more || !last);
      ++stats_.socket_writes;
      if (!s) co_return fail(s.error().code, s.error().message + " (to " + peer_ + ")");
      stats_.bytes_sent += f.piped.length;
      continue;
    }
    if (!pipe_) {
      auto pipe = Pipe::create();
      if (!pipe) co_return tl::unexpected(pipe.error());
      pipe_ = std::move(*pipe);
    }
    // What was gathered rides in the pipe ahead of the payload when it is small (this
    // frame's header, and maybe a few small frames before it). Otherwise the earlier
    // frames go out first, and then only this frame's header rides, if small enough.
    std::array<std::byte, lead_capacity> lead_bytes;
    const std::size_t limit = std::min(lead_bytes.size(), Pipe::lead_limit());
    if (gathered_size(buffers) > limit) {
      std::vector<asio::const_buffer> own(buffers.begin() + static_cast<std::ptrdiff_t>(own_from), buffers.end());
      if (gathered_size(own) <= limit) buffers.resize(own_from);
      else own.clear();  // goes out with the rest
      if (Status sent = co_await send_memory(buffers, true); !sent) co_return sent;
      buffers = std::move(own);
    }
    const std::size_t lead = gathered_size(buffers);
    asio::buffer_copy(asio::buffer(lead_bytes.data(), lead), buffers);
    buffers.clear();
    Status s = co_await splice_file_to_socket(FileRing::of(socket_.get_executor()), *pipe_, f.file.fd,
                                              f.file.offset, f.file.length, socket_.native_handle(), more || !last,
                                              std::span<const std::byte>(lead_bytes.data(), lead));
    ++stats_.socket_writes;
    if (!s) {
      pipe_.reset();  // may hold pages that never left
      co_return fail(s.error().code, s.error().message + " (to " + peer_ + ")");
    }
    stats_.bytes_sent += lead + f.file.length;
  }
  co_return co_await send_memory(buffers, more);
}

awaitable<Status> SocketStream::read_exactly(std::span<std::byte> into) {
  co_return co_await receive_exactly(socket_, into, peer_);
}

awaitable<Result<std::size_t>> SocketStream::read_some(std::span<std::byte> into) {
  auto [ec, n] = co_await socket_.async_receive(asio::buffer(into.data(), into.size()), use_nothrow);
  if (ec == asio::error::eof) co_return std::size_t{0};
  if (ec) co_return fail(ec, "receiving from " + peer_ + ": " + ec.message());
  co_return n;
}

awaitable<Result<std::size_t>> SocketStream::peek_some(std::span<std::byte> into) {
  auto [ec, n] = co_await socket_.async_receive(asio::buffer(into.data(), into.size()),
                                                asio::socket_base::message_peek, use_nothrow);
  if (ec == asio::error::eof) co_return std::size_t{0};
  if (ec) co_return fail(ec, "receiving from " + peer_ + ": " + ec.message());
  co_return n;
}

awaitable<Status> SocketStream::close() {
  stats_.tcp_segments = tcp_data_segments_sent(socket_.native_handle());
  asio::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_send, ec);
  socket_.close(ec);
  co_return Status{};
}

void SocketStream::reset() {
  cork_.release();
  asio::error_code ignored;
  hard_close(socket_.release(ignored));
}

void SocketStream::finish_sending() {
  cork_.release();
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_send, ignored);
}

void SocketStream::stop_receiving() {
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  socket_.cancel(ignored);
}

void SocketStream::abort() {
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.cancel(ignored);
}

StreamStats SocketStream::stats() const {
  StreamStats s = stats_;
  if (socket_.is_open()) s.tcp_segments = tcp_data_segments_sent(const_cast<Socket&>(socket_).native_handle());
  return s;
}

Socket SocketStream::release_socket() {
  cork_.release();
  return std::move(socket_);
}

}  // namespace sluice
