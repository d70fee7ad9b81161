// The NBD Destination adapter against a scripted server, over a stream that is already
// connected (NbdDestination::open_on, what an HTTP import that switches to NBD uses):
// what it sends for writes, zeros (WRITE_ZEROES, NO_HOLE, explicit zero WRITEs, never
// TRIM), flush and finish, and the exports it refuses before any data moves.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <string>
#include <vector>

#include "engine/net/send_buffer.hpp"
#include "engine/net/tcp_info.hpp"
#include "engine/task_group.hpp"
#include "protocols/nbd/client/nbd_destination.hpp"
#include "tests/unit/nbd_fake_server.hpp"
#include "tests/unit/run_loop.hpp"
#include "tests/unit/skip.hpp"

// See nbd_client_test.cpp: a g++ 12 false positive on inlined coroutine ramps.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

using namespace sluice;
using namespace sluice::nbd;
using test::FakeServer;
using test::FakeServerOptions;
using test::filled;
using test::simple_reply;

namespace {

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

struct Seen {
  std::vector<RequestHeader> requests;
  std::vector<std::vector<std::byte>> payloads;
};

// Answers every request with success until DISC, recording what came.
awaitable<Status> record_until_disc(FakeServer& server, FakeServerOptions options, Seen& seen) {
  if (Status s = co_await server.handshake(options); !s) co_return s;
  for (;;) {
    std::vector<std::byte> payload;
    auto header = co_await server.request(&payload);
    if (!header) co_return Status{};  // the client hung up (a refused export)
    seen.requests.push_back(*header);
    seen.payloads.push_back(std::move(payload));
    if (header->command == Command::disc) co_return Status{};
    auto reply = simple_reply(header->cookie);
    if (Status s = co_await server.send(reply); !s) co_return s;
  }
}

awaitable<void> destination_on_stream(bool write_zeroes,
                                      FakeServerOptions::Style style = FakeServerOptions::Style::fixed_newstyle) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions options;
  options.style = style;
  options.structured_replies = false;
  options.size = 8 << 20;
  if (!write_zeroes) options.flags &= static_cast<std::uint16_t>(~transmission_flag::send_write_zeroes);
  Seen seen;
  TaskGroup serving(ex);
  serving.spawn(record_until_disc(server, options, seen));
  ClientOptions client;
  client.export_name = "disk";
  auto stream = std::make_unique<SocketStream>(std::move(sockets.first));
  auto opened = co_await NbdDestination::open_on(std::move(stream), "test stream", 4 << 20, client);
  REQUIRE(opened);
  NbdDestination& d = **opened;
  CHECK(d.traits().zero_is_cheap == write_zeroes);
  CHECK(d.facts().size == (8 << 20));
  CHECK(d.facts().export_name_fallback == (style != FakeServerOptions::Style::fixed_newstyle));
  Buffer data = Buffer::allocate(65536, 4096);
  std::memset(data.writable().data(), 0x33, data.size());
  Status written = co_await d.write(0, std::move(data));
  Status punched = co_await d.zero(1 << 20, 3 << 20, ZeroMode::may_punch);
  Status allocated = co_await d.zero(65536, 65536, ZeroMode::allocate);
  Status flushed = co_await d.flush();
  Status finished = co_await d.finish();
  Status closed = co_await d.close();
  Status served = co_await serving.join();
  CHECK(written);
  CHECK(punched);
  CHECK(allocated);
  CHECK(flushed);
  CHECK(finished);
  CHECK(closed);
  CHECK(served);

  std::uint64_t zero_write_bytes = 0;
  int zero_requests = 0;
  for (std::size_t i = 0; i < seen.requests.size(); ++i) {
    const RequestHeader& r = seen.requests[i];
    CHECK(r.command != Command::trim);  // never TRIM to zero
    if (r.command == Command::write_zeroes) {
      ++zero_requests;
      if (r.offset == 65536) CHECK(r.flags == command_flag::no_hole);
      if (r.offset == (1 << 20)) CHECK(r.flags == 0);
    }
    if (r.command == Command::write && r.offset != 0) {
      CHECK(std::all_of(seen.payloads[i].begin(), seen.payloads[i].end(), [](std::byte b) { return b == std::byte{0}; }));
      zero_write_bytes += r.length;
    }
  }
  if (write_zeroes) {
    CHECK(zero_requests == 2);
    CHECK(zero_write_bytes == 0);
  } else {
    CHECK(zero_requests == 0);
    CHECK(zero_write_bytes == (3 << 20) + 65536);
  }
  REQUIRE(seen.requests.size() >= 3);
  CHECK(seen.requests[0].command == Command::write);
  CHECK(seen.payloads[0] == filled(65536, 0x33));
  CHECK(seen.requests[seen.requests.size() - 2].command == Command::flush);
  CHECK(seen.requests.back().command == Command::disc);
}

awaitable<void> refused_on_stream(std::uint16_t flags, std::uint64_t size, std::string_view why) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions options;
  options.flags = flags;
  options.size = size;
  Seen seen;
  TaskGroup serving(ex);
  serving.spawn(record_until_disc(server, options, seen));
  ClientOptions client;
  auto stream = std::make_unique<SocketStream>(std::move(sockets.first));
  auto opened = co_await NbdDestination::open_on(std::move(stream), "test stream", 4 << 20, client);
  co_await serving.join();
  REQUIRE_FALSE(opened);
  CHECK(contains(opened.error().message, why));
  CHECK(contains(opened.error().message, "test stream"));
  // Refused before any data moved; the client still said goodbye.
  REQUIRE(seen.requests.size() == 1);
  CHECK(seen.requests[0].command == Command::disc);
}

}  // namespace

TEST_CASE("NBD destination on a connected stream: WRITE, WRITE_ZEROES with NO_HOLE when allocated, FLUSH, DISC") {
  test::run(destination_on_stream(true));
}

TEST_CASE("NBD destination without WRITE_ZEROES: zeros become explicit zero WRITEs, never TRIM") {
  test::run(destination_on_stream(false));
}

TEST_CASE("NBD destination on old servers: newstyle without the fixed flag, and oldstyle") {
  test::run(destination_on_stream(true, FakeServerOptions::Style::newstyle));
  test::run(destination_on_stream(false, FakeServerOptions::Style::oldstyle));
}

namespace {

awaitable<void> oldstyle_refused_with_tls() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions options;
  options.style = FakeServerOptions::Style::oldstyle;
  TaskGroup serving(ex);
  Seen seen;
  serving.spawn(record_until_disc(server, options, seen));
  ClientOptions client;
  client.tls = true;  // nbds:// on a plain stream: STARTTLS or nothing
  auto stream = std::make_unique<SocketStream>(std::move(sockets.first));
  auto opened = co_await NbdDestination::open_on(std::move(stream), "test stream", 4 << 20, client);
  co_await serving.join();
  REQUIRE_FALSE(opened);
  CHECK(contains(opened.error().message, "oldstyle"));
  CHECK(contains(opened.error().message, "no STARTTLS"));
  CHECK(seen.requests.empty());
}

}  // namespace

TEST_CASE("NBD destination: an oldstyle server is refused when TLS is required") {
  test::run(oldstyle_refused_with_tls());
}

TEST_CASE("NBD destination: a read-only or too small export is refused before any data moves") {
  const std::uint16_t base = transmission_flag::has_flags | transmission_flag::send_flush;
  test::run(refused_on_stream(base | transmission_flag::read_only, 8 << 20, "is read-only"));
  test::run(refused_on_stream(base, 1 << 20, "holds 1048576 bytes, fewer than the source's 4194304"));
}

namespace {

// This process's TCP socket connected to `port` on loopback, or -1.
int connection_to(std::uint16_t port) {
  for (int fd = 3; fd < 1024; ++fd) {
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 || peer.sin_family != AF_INET) continue;
    if (ntohs(peer.sin_port) == port) return fd;
  }
  return -1;
}

awaitable<Status> accept_and_record(Acceptor& acceptor, Socket& accepted, std::optional<FakeServer>& server,
                                    Seen& seen) {
  auto [ec] = co_await acceptor.async_accept(accepted, use_nothrow);
  if (ec) co_return fail(ec, "accept");
  server.emplace(std::move(accepted));
  FakeServerOptions options;
  options.size = 8 << 20;
  co_return co_await record_until_disc(*server, options, seen);
}

// Opens a destination over TCP loopback and checks its socket's send buffer: fitted to
// the path (twice what fitted_send_buffer asks, as Linux keeps) or the kernel's own.
awaitable<void> send_buffer_over_tcp(bool fit) {
  auto ex = co_await asio::this_coro::executor;
  auto acceptor = listen_on(ex, NetAddress{NetAddress::Kind::tcp, "127.0.0.1", 0, {}});
  REQUIRE(acceptor);
  const std::uint16_t port = bound_port(*acceptor);
  Socket accepted(ex);
  TaskGroup serving(ex);
  Seen seen;
  std::optional<FakeServer> server;
  serving.spawn(accept_and_record(*acceptor, accepted, server, seen));
  Target target;
  target.address = NetAddress{NetAddress::Kind::tcp, "127.0.0.1", port, {}};
  target.export_name = "disk";
  target.display = "nbd://127.0.0.1:" + std::to_string(port) + "/disk";
  ClientOptions client;
  CHECK(client.stream.fit_send_buffer);  // the client's default
  client.stream.fit_send_buffer = fit;
  client.connections = 1;
  auto opened = co_await NbdDestination::open(target, 4 << 20, client);
  REQUIRE(opened);
  const int fd = connection_to(port);
  REQUIRE(fd >= 0);
  int size = -1;
  socklen_t size_length = sizeof size;
  REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &size_length) == 0);
  // The buffer was fitted at connect time; the least round trip can only have fallen
  // since, so the fit for it now is the same size or smaller.
  const std::size_t fitted_now = fitted_send_buffer(tcp_least_round_trip(fd), tcp_send_buffer_ceiling());
  if (!fit) {
    // Autotuning sized it for loopback's 64 KiB segments at the handshake: megabytes
    // (4 MiB here), where a fit for a loopback round trip is a few hundred KiB.
    CHECK(static_cast<std::size_t>(size) > (1u << 20));
  } else if (fitted_now == 0) {
    test::skip_test("loopback round trip of " + std::to_string(tcp_least_round_trip(fd).count()) +
                    " us: too long to fit here");
  } else {
    // Linux keeps twice what is asked.
    CHECK(size % 2 == 0);
    CHECK(static_cast<std::size_t>(size) / 2 >= fitted_now);
    CHECK(static_cast<std::size_t>(size) < tcp_send_buffer_ceiling());
  }
  CHECK(co_await (*opened)->finish());
  CHECK(co_await (*opened)->close());
  co_await serving.join();
  REQUIRE_FALSE(seen.requests.empty());
  CHECK(seen.requests.back().command == Command::disc);
}

}  // namespace

// A host stalled enough to make loopback's round trip long gets no fit, so nothing to check.
TEST_CASE("NBD destination over TCP: the send buffer is fitted to the path" * doctest::test_suite("environment")) {
  test::run(send_buffer_over_tcp(true));
}

TEST_CASE("NBD destination over TCP: the kernel sizes the send buffer when the caller says not to fit it") {
  test::run(send_buffer_over_tcp(false));
}
