// Test helper: two connected streams over loopback TCP, optionally upgraded to TLS on
// both ends, for tests that need a real socket between a client and a server.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/net/address.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/task_group.hpp"

namespace sluice::test {

struct Pair {
  std::unique_ptr<Stream> client;
  std::unique_ptr<Stream> server;
};

// Coroutines get their state as parameters: a lambda coroutine spawned from a
// temporary closure would outlive its captures.
inline awaitable<Status> connect_into(NetAddress target, std::optional<Result<Socket>>* out) {
  *out = co_await connect_to(target);
  co_return Status{};
}

inline awaitable<Status> accept_tls(std::shared_ptr<TlsContext> tls, Socket socket,
                             std::optional<Result<std::unique_ptr<TlsStream>>>* out) {
  *out = co_await TlsStream::handshake(tls, std::move(socket), {});
  co_return Status{};
}

// A connected pair over loopback TCP, optionally upgraded to TLS on both ends.
inline awaitable<Result<Pair>> connected_pair(std::shared_ptr<TlsContext> client_tls = nullptr,
                                       std::shared_ptr<TlsContext> server_tls = nullptr,
                                       std::string hostname = "localhost") {
  auto ex = co_await asio::this_coro::executor;
  auto acceptor = listen_on(ex, NetAddress{NetAddress::Kind::tcp, "127.0.0.1", 0, {}});
  if (!acceptor) co_return tl::unexpected(acceptor.error());
  NetAddress target{NetAddress::Kind::tcp, "127.0.0.1", bound_port(*acceptor), {}};
  Socket accepted(ex);
  std::optional<Result<Socket>> connected;
  TaskGroup group(ex);
  group.spawn(connect_into(target, &connected));
  auto [ec] = co_await acceptor->async_accept(accepted, use_nothrow);
  co_await group.join();
  if (ec) co_return fail(ec, "accept");
  if (!*connected) co_return tl::unexpected(connected->error());
  Pair pair;
  if (!client_tls) {
    pair.client = std::make_unique<SocketStream>(std::move(**connected));
    pair.server = std::make_unique<SocketStream>(std::move(accepted));
    co_return pair;
  }
  std::optional<Result<std::unique_ptr<TlsStream>>> server_side;
  TaskGroup handshakes(ex);
  handshakes.spawn(accept_tls(server_tls, std::move(accepted), &server_side));
  auto client_side = co_await TlsStream::handshake(client_tls, std::move(**connected), {}, hostname);
  co_await handshakes.join();
  if (!client_side) co_return tl::unexpected(client_side.error());
  if (!*server_side) co_return tl::unexpected(server_side->error());
  pair.client = std::move(*client_side);
  pair.server = std::move(**server_side);
  co_return pair;
}

}  // namespace sluice::test
