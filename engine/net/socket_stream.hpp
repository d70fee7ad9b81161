// A plain TCP or Unix-domain stream: frames leave as gathered writes (one sendmsg
// carries many headers and payloads), MSG_MORE and TCP_CORK only while more is
// already queued, or within a batch around a spliced payload.
#pragma once

#include <asio/generic/stream_protocol.hpp>

#include <optional>

#include "engine/net/stream.hpp"
#include "engine/uring/pipe.hpp"

namespace sluice {

using Socket = asio::generic::stream_protocol::socket;

class SocketStream final : public Stream {
 public:
  SocketStream(Socket socket, StreamOptions options = {});
  ~SocketStream() override;

  awaitable<Status> read_exactly(std::span<std::byte> into) override;
  awaitable<Result<std::size_t>> read_some(std::span<std::byte> into) override;
  awaitable<Result<std::size_t>> peek_some(std::span<std::byte> into) override;
  awaitable<Status> close() override;
  void abort() override;
  void reset() override;
  void stop_receiving() override;
  void finish_sending() override;
  StreamStats stats() const override;
  bool is_tls() const override { return false; }
  bool splices() const override { return true; }
  int socket_fd() const override { return const_cast<Socket&>(socket_).native_handle(); }
  std::string peer() const override { return peer_; }

  Socket& socket() { return socket_; }
  // Hands the connection over (STARTTLS upgrades a negotiated plain stream).
  Socket release_socket();

 protected:
  awaitable<Status> transmit(std::span<const Pending> batch, bool more) override;
  std::size_t batch_bytes() const override { return options_.batch_bytes; }
  std::chrono::seconds stall_timeout() const override { return options_.stall_timeout; }
  std::size_t batch_frames() const override { return 32; }  // two iovecs each, Asio's limit is 64
  TcpCork* cork() override { return &cork_; }

 private:
  awaitable<Status> send_memory(std::vector<asio::const_buffer>& buffers, bool more);

  Socket socket_;
  StreamOptions options_;
  std::optional<Pipe> pipe_;  // for FileSlice frames, made on first use
  TcpCork cork_;
  std::string peer_;
  StreamStats stats_;
};

// Sends all of `buffers` with one or more sendmsg calls (MSG_NOSIGNAL, plus MSG_MORE
// when `more`), counting calls into `stats`. Shared by the plain and TLS streams.
awaitable<Status> send_all(Socket& socket, std::vector<asio::const_buffer> buffers, bool more,
                           StreamStats& stats, const std::string& peer);

// Reads exactly `into` or fails naming the peer.
awaitable<Status> receive_exactly(Socket& socket, std::span<std::byte> into, const std::string& peer);

// "tcp 127.0.0.1:10809" / "unix /path"; configures TCP_NODELAY as asked.
std::string describe_peer(Socket& socket);
void apply_socket_options(Socket& socket, const StreamOptions& options);

}  // namespace sluice
