// RequestReader: WRITE payloads spliced from a real socket into a pipe, in step with
// the requests around them, including when the pipe fills up before the payload ends.
#include <doctest/doctest.h>
#include <fcntl.h>

#include <asio/write.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/net/socket_stream.hpp"
#include "engine/uring/pipe.hpp"
#include "nbd_fake_server.hpp"
#include "protocols/nbd/server/request_reader.hpp"
#include "run_loop.hpp"

// g++ 12 inlines these small coroutines' ramps into the test functions and then
// mistakes Asio's frame allocator (operator new inside aligned_new) for a mismatch with
// the frame's operator delete. ASan builds check the real pairing at run time.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

using namespace sluice;
using namespace sluice::nbd;

namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = std::byte(static_cast<unsigned char>((i * 131 + seed) >> 3));
  return bytes;
}

std::vector<std::byte> write_request(std::uint64_t cookie, std::uint64_t offset, const std::vector<std::byte>& payload) {
  auto head = encode_request_header(
      RequestHeader{0, Command::write, cookie, offset, static_cast<std::uint32_t>(payload.size())});
  std::vector<std::byte> bytes(head.size() + payload.size());
  std::copy(head.begin(), head.end(), bytes.begin());
  std::copy(payload.begin(), payload.end(), bytes.begin() + static_cast<std::ptrdiff_t>(head.size()));
  return bytes;
}

// A server-side RequestReader over one end of a socket pair, the client's end to feed
// it, and an empty pipe. The stream makes its socket non-blocking itself, as
// payload_to_pipe() requires.
struct ReaderOnSocket {
  explicit ReaderOnSocket(std::pair<Socket, Socket> pair)
      : client(std::move(pair.first)), stream(std::move(pair.second)), reader(stream), pipe(make_pipe()) {}
  // The reader refers to the stream: the object never moves (returned by elision).
  ReaderOnSocket(const ReaderOnSocket&) = delete;
  ReaderOnSocket& operator=(const ReaderOnSocket&) = delete;
  static ReaderOnSocket on(executor ex) { return ReaderOnSocket(test::socket_pair(ex)); }

  static Pipe make_pipe() {
    auto made = Pipe::create();
    REQUIRE(made);
    return std::move(*made);
  }
  // The next request's header, which must be there.
  awaitable<RequestHeader> header() {
    auto next = co_await reader.next();
    REQUIRE(next);
    REQUIRE(*next);
    co_return **next;
  }
  std::vector<std::byte> take(std::size_t n) {
    std::vector<std::byte> out(n);
    REQUIRE(pipe.take(out));
    return out;
  }

  Socket client;
  SocketStream stream;
  RequestReader reader;
  Pipe pipe;
};

// Sends `bytes` in pieces of `piece`, pausing between them so that the reader finds the
// socket empty and has to wait for the rest.
awaitable<void> send_slowly(Socket& socket, std::vector<std::byte> bytes, std::size_t piece) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    std::size_t n = std::min(piece, bytes.size() - at);
    co_await asio::async_write(socket, asio::buffer(bytes.data() + at, n), asio::use_awaitable);
    pause.expires_after(std::chrono::milliseconds(2));
    co_await pause.async_wait(asio::use_awaitable);
  }
}

awaitable<void> spliced_in_pieces() {
  auto ex = co_await asio::this_coro::executor;
  auto at = ReaderOnSocket::on(ex);
  CHECK((::fcntl(at.stream.socket_fd(), F_GETFL) & O_NONBLOCK) != 0);

  const auto first = pattern(200 * 1024 + 7, 1);
  const auto second = pattern(3000, 2);
  auto bytes = write_request(1, 0, first);
  auto more = write_request(2, 4096, second);
  bytes.insert(bytes.end(), more.begin(), more.end());
  asio::co_spawn(ex, send_slowly(at.client, bytes, 50000), asio::detached);

  CHECK((co_await at.header()).cookie == 1);
  auto moved = co_await at.reader.payload_to_pipe(at.pipe, first.size());
  REQUIRE(moved);
  CHECK(*moved == first.size());
  CHECK(at.take(first.size()) == first);

  const RequestHeader next = co_await at.header();
  CHECK(next.cookie == 2);
  CHECK(next.offset == 4096);
  std::vector<std::byte> small(second.size());
  REQUIRE(co_await at.reader.payload(small));
  CHECK(small == second);
}

awaitable<void> pipe_fills_up() {
  auto at = ReaderOnSocket::on(co_await asio::this_coro::executor);
  // Four pages: far less than the payload, as when a socket hands over many small
  // fragments that each take a slot of their own.
  REQUIRE(::fcntl(at.pipe.write_end(), F_SETPIPE_SZ, 4 * 4096) >= 4 * 4096);

  const auto payload = pattern(96 * 1024, 3);
  const auto bytes = write_request(7, 0, payload);
  co_await asio::async_write(at.client, asio::buffer(bytes), asio::use_awaitable);

  co_await at.header();
  auto moved = co_await at.reader.payload_to_pipe(at.pipe, payload.size());
  REQUIRE(moved);
  CHECK(*moved > 0);
  CHECK(*moved < payload.size());
  auto received = at.take(*moved);
  std::vector<std::byte> rest(payload.size() - *moved);
  REQUIRE(co_await at.reader.payload(rest));
  received.insert(received.end(), rest.begin(), rest.end());
  CHECK(received == payload);
}

awaitable<void> closed_inside_payload() {
  auto at = ReaderOnSocket::on(co_await asio::this_coro::executor);

  const auto payload = pattern(64 * 1024, 4);
  auto bytes = write_request(9, 0, payload);
  bytes.resize(bytes.size() - 1000);  // cut short
  co_await asio::async_write(at.client, asio::buffer(bytes), asio::use_awaitable);
  at.client.close();

  co_await at.header();
  auto moved = co_await at.reader.payload_to_pipe(at.pipe, payload.size());
  REQUIRE_FALSE(moved);
  CHECK(moved.error().message.find("closed the connection inside a WRITE payload") != std::string::npos);
}

}  // namespace

TEST_CASE("RequestReader: a WRITE payload arriving in pieces is spliced whole into a pipe, in step with the next request") {
  test::run(spliced_in_pieces());
}

TEST_CASE("RequestReader: when the pipe fills up first, it says how much it moved and payload() takes the rest") {
  test::run(pipe_fills_up());
}

TEST_CASE("RequestReader: a client closing inside a spliced WRITE payload is an error that says so") {
  test::run(closed_inside_payload());
}
