// Where to connect or listen: a TCP host and port, or a Unix socket path.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <asio/basic_socket_acceptor.hpp>
#include <asio/generic/stream_protocol.hpp>

#include "engine/asio.hpp"
#include "engine/cancellation.hpp"
#include "engine/error.hpp"
#include "engine/net/socket_stream.hpp"

namespace sluice {

struct NetAddress {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  std::string host;  // tcp: name or literal address (IPv6 without brackets)
  std::uint16_t port = 0;
  std::string path;  // unix

  // "tcp localhost:10809", "unix /run/sluice.sock"
  std::string describe() const;
};

using Acceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;

awaitable<Result<Socket>> connect_to(const NetAddress& address);
// The same, giving up on an address that has not answered within `timeout` (a host
// that drops the connection request would otherwise hold it for minutes), or at once
// when `cancellation` is requested.
awaitable<Result<Socket>> connect_to(const NetAddress& address, std::chrono::seconds timeout,
                                     Cancellation* cancellation = nullptr);

// Listens on `address`; a stale Unix socket file left by a dead server is replaced.
Result<Acceptor> listen_on(executor ex, const NetAddress& address, int backlog = 128);

// The port a TCP acceptor is bound to (useful after listening on port 0).
std::uint16_t bound_port(const Acceptor& acceptor);

}  // namespace sluice

namespace sluice {

// Where a receiver listens: tcp://HOST:PORT, tls://HOST:PORT (TCP, with `tls` set),
// unix:///PATH. Port 0 asks for any free port.
struct ListenUri {
  NetAddress address;
  bool tls = false;
};
Result<ListenUri> parse_listen_uri(std::string_view text);

}  // namespace sluice
