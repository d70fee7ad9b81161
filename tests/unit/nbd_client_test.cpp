// The NBD client's transmission phase against a scripted server, for what real servers
// never send: replies out of order with reads split into chunks, bad magics, unknown
// cookies, malformed chunks, a reply cut short; plus what is hard to observe from the
// outside: a WRITE's buffer is released once sent, abort() accounts for every request,
// the handshake falls back to EXPORT_NAME. The client is the real code (negotiate,
// Connection); only the server is fake.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <string>
#include <vector>

#include "engine/net/tls_context.hpp"
#include "engine/task_group.hpp"
#include "protocols/nbd/client/connection.hpp"
#include "protocols/nbd/client/handshake.hpp"
#include "protocols/nbd/client/target.hpp"
#include "tests/unit/nbd_fake_server.hpp"
#include "tests/unit/run_loop.hpp"
#include "tests/unit/wire_bytes.hpp"

// g++ 12 inlines these small coroutines' ramps into the test functions and then
// mistakes Asio's frame allocator (operator new inside aligned_new) for a mismatch with
// the frame's operator delete. ASan builds check the real pairing at run time.
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



std::vector<std::byte> concat(std::initializer_list<std::span<const std::byte>> parts) {
  std::vector<std::byte> out;
  for (auto p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<std::byte> data_chunk(std::uint64_t cookie, std::uint16_t flags, std::uint64_t offset,
                                  std::span<const std::byte> data) {
  std::array<std::byte, offset_data_header_size> head{};
  encode_offset_data_header(cookie, flags, offset, static_cast<std::uint32_t>(data.size()), head);
  return concat({head, data});
}

std::vector<std::byte> none_chunk(std::uint64_t cookie) {
  auto head = encode_none_chunk(cookie);
  return {head.begin(), head.end()};
}

// Runs `op` and keeps its result, so several requests can be in flight at once.
awaitable<Status> keep(awaitable<Status> op, std::optional<Status>* out) {
  *out = co_await std::move(op);
  co_return Status{};
}

// The client's side: the real handshake, then a started Connection.
awaitable<Result<std::unique_ptr<Connection>>> connect(Socket socket, bool structured, int timeout_seconds = 0) {
  auto ex = co_await asio::this_coro::executor;
  ClientOptions options;
  options.structured_replies = structured;
  auto negotiated = co_await negotiate(std::make_unique<SocketStream>(std::move(socket)), options);
  if (!negotiated) co_return tl::unexpected(negotiated.error());
  auto connection = std::make_unique<Connection>(ex, std::move(negotiated->stream), std::move(negotiated->facts),
                                                 std::chrono::seconds(timeout_seconds));
  connection->start();
  co_return connection;
}

// Serves the handshake, then hands over to `script`, which ends by reading DISC.
using Script = awaitable<Status> (*)(FakeServer&);
awaitable<Status> serve(FakeServer& server, FakeServerOptions options, Script script) {
  if (Status s = co_await server.handshake(options); !s) co_return s;
  co_return co_await script(server);
}

// Reads two requests; answers in reverse order, the first READ split into a hole and a
// data chunk (hole first), interleaved with the second READ's chunks.
awaitable<Status> reordered(FakeServer& server) {
  auto first = co_await server.request();
  auto second = co_await server.request();
  if (!first || !second) co_return fail(std::errc::protocol_error, "no requests");
  const RequestHeader& a = first->offset == 0 ? *first : *second;
  const RequestHeader& b = first->offset == 0 ? *second : *first;
  auto hole = encode_offset_hole(a.cookie, 0, 32768, 32768);
  auto b_data = data_chunk(b.cookie, 0, b.offset, filled(b.length, 0x42));
  auto a_data = data_chunk(a.cookie, reply_flag::done, 0, filled(32768, 0x17));
  auto b_done = none_chunk(b.cookie);
  for (auto bytes : {std::span<const std::byte>(hole), std::span<const std::byte>(b_data),
                     std::span<const std::byte>(a_data), std::span<const std::byte>(b_done)}) {
    if (Status s = co_await server.send(bytes); !s) co_return s;
  }
  auto disc = co_await server.request();
  if (!disc || disc->command != Command::disc) co_return fail(std::errc::protocol_error, "no DISC");
  co_return Status{};
}

awaitable<void> reordered_reads() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, &reordered));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  Connection& c = **connection;
  CHECK(c.facts().structured_replies);
  std::vector<std::byte> a = filled(65536, 0xee), b = filled(65536, 0xee);
  std::optional<Status> ra, rb;
  TaskGroup reads(ex);
  reads.spawn(keep(c.read(0, a), &ra));
  reads.spawn(keep(c.read(65536, b), &rb));
  co_await reads.join();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(*ra);
  CHECK(*rb);
  CHECK(std::all_of(a.begin(), a.begin() + 32768, [](std::byte x) { return x == std::byte{0x17}; }));
  CHECK(std::all_of(a.begin() + 32768, a.end(), [](std::byte x) { return x == std::byte{0}; }));
  CHECK(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0x42}; }));
  co_await c.disconnect();
  Status served = co_await serving.join();
  CHECK(served);
}

// Reads two requests, then sends 16 bytes that are no reply at all.
awaitable<Status> bad_magic(FakeServer& server) {
  co_await server.request();
  co_await server.request();
  auto garbage = test::wire("deadbeef 00000000 0000000000000001");
  co_await server.send(garbage);
  co_return Status{};
}

// Answers a cookie nobody asked with.
awaitable<Status> unknown_cookie(FakeServer& server) {
  co_await server.request();
  co_await server.request();
  auto reply = simple_reply(0x999999);
  co_await server.send(reply);
  co_return Status{};
}

// Two reads in flight; the script breaks the connection. Both fail naming their own
// offset and the cause; a later request fails at once with the same cause.
awaitable<void> broken_by(Script script, std::string_view cause) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, script));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  Connection& c = **connection;
  std::vector<std::byte> a(4096), b(4096);
  std::optional<Status> ra, rb;
  TaskGroup reads(ex);
  reads.spawn(keep(c.read(0, a), &ra));
  reads.spawn(keep(c.read(8192, b), &rb));
  co_await reads.join();
  REQUIRE(ra);
  REQUIRE(rb);
  REQUIRE_FALSE(*ra);
  REQUIRE_FALSE(*rb);
  CHECK(ra->error().code == std::errc::protocol_error);
  CHECK(contains(ra->error().message, "NBD READ of 4096 bytes at offset 0 failed"));
  CHECK(contains(rb->error().message, "NBD READ of 4096 bytes at offset 8192 failed"));
  CHECK(contains(ra->error().message, cause));
  CHECK(contains(rb->error().message, cause));
  Status later = co_await c.flush();
  REQUIRE_FALSE(later);
  CHECK(contains(later.error().message, "NBD FLUSH failed"));
  CHECK(contains(later.error().message, cause));
  CHECK(c.in_flight() == 0);
  co_await c.disconnect();
  co_await serving.join();
}

// A READ answered with an OFFSET_DATA chunk outside its range.
awaitable<Status> data_outside(FakeServer& server) {
  auto read = co_await server.request();
  auto chunk = data_chunk(read->cookie, reply_flag::done, read->offset + read->length, filled(512, 1));
  co_await server.send(chunk);
  co_return Status{};
}

// A READ finished (DONE) with half of it never sent; then a good READ.
awaitable<Status> uncovered_then_good(FakeServer& server) {
  auto read = co_await server.request();
  auto half = data_chunk(read->cookie, reply_flag::done, read->offset, filled(read->length / 2, 7));
  co_await server.send(half);
  auto good = co_await server.request();
  auto whole = data_chunk(good->cookie, reply_flag::done, good->offset, filled(good->length, 9));
  co_await server.send(whole);
  auto disc = co_await server.request();
  co_return disc ? Status{} : Status(tl::unexpected(disc.error()));
}

// ERROR_OFFSET in the middle of a READ, with the server's message; the connection
// stays usable for a WRITE.
awaitable<Status> read_error_then_write(FakeServer& server) {
  auto read = co_await server.request();
  auto error = encode_error_chunk(read->cookie, reply_flag::done, Errno::eio, "bad sector", read->offset + 4096);
  co_await server.send(error);
  std::vector<std::byte> payload;
  auto write = co_await server.request(&payload);
  auto ack = none_chunk(write->cookie);
  co_await server.send(ack);
  auto disc = co_await server.request();
  co_return disc ? Status{} : Status(tl::unexpected(disc.error()));
}

// Promises 64 KiB of data, sends 1000 bytes and hangs up.
awaitable<Status> cut_short(FakeServer& server) {
  auto read = co_await server.request();
  std::array<std::byte, offset_data_header_size> head{};
  encode_offset_data_header(read->cookie, reply_flag::done, read->offset, read->length, head);
  co_await server.send(head);
  auto some = filled(1000, 3);
  co_await server.send(some);
  co_await server.stream().close();
  co_return Status{};
}

// A structured chunk on a connection that negotiated simple replies only.
awaitable<Status> unasked_chunk(FakeServer& server) {
  auto read = co_await server.request();
  auto chunk = data_chunk(read->cookie, reply_flag::done, read->offset, filled(read->length, 1));
  co_await server.send(chunk);
  co_return Status{};
}

// A simple reply with READ data on a connection that negotiated structured replies.
awaitable<Status> simple_after_structured(FakeServer& server) {
  auto read = co_await server.request();
  auto head = simple_reply(read->cookie);
  co_await server.send(head);
  auto data = filled(read->length, 2);
  co_await server.send(data);
  co_return Status{};
}

// Runs one READ of 8 KiB at 64 KiB against `script`; returns its result after the
// connection is closed.
awaitable<Status> one_read(Script script, FakeServerOptions options, bool structured) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, options, script));
  auto connection = co_await connect(std::move(sockets.first), structured);
  REQUIRE(connection);
  std::vector<std::byte> into(8192);
  Status result = co_await (*connection)->read(65536, into);
  co_await (*connection)->disconnect();
  co_await serving.join();
  co_return result;
}

}  // namespace

TEST_CASE("NBD client: replies in any order, a READ reassembled from hole and data chunks") {
  test::run(reordered_reads());
}

TEST_CASE("NBD client: a reply with a bad magic fails every request in flight, and later ones") {
  test::run(broken_by(&bad_magic, "magic is 0xdeadbeef"));
}

TEST_CASE("NBD client: a reply for an unknown cookie fails every request in flight") {
  test::run(broken_by(&unknown_cookie, "matches no request in flight"));
}

TEST_CASE("NBD client: malformed structured replies") {
  SUBCASE("OFFSET_DATA outside the request breaks the connection") {
    Status s = test::run(one_read(&data_outside, {}, true));
    REQUIRE_FALSE(s);
    CHECK(s.error().code == std::errc::protocol_error);
    CHECK(contains(s.error().message, "lies outside the READ of 8192 bytes at offset 65536"));
  }
  SUBCASE("a structured chunk without structured replies breaks the connection") {
    FakeServerOptions simple;
    simple.structured_replies = false;
    Status s = test::run(one_read(&unasked_chunk, simple, false));
    REQUIRE_FALSE(s);
    CHECK(contains(s.error().message, "structured replies were not negotiated"));
  }
  SUBCASE("a simple reply carrying READ data after structured replies were negotiated is refused") {
    Status s = test::run(one_read(&simple_after_structured, {}, true));
    REQUIRE_FALSE(s);
    CHECK(s.error().code == std::errc::protocol_error);
    CHECK(contains(s.error().message, "with a simple reply carrying data, but structured replies were negotiated"));
  }
  SUBCASE("a reply cut short by the server hanging up") {
    Status s = test::run(one_read(&cut_short, {}, true));
    REQUIRE_FALSE(s);
    CHECK(contains(s.error().message, "NBD READ of 8192 bytes at offset 65536 failed: the connection to"));
    CHECK(contains(s.error().message, "broke"));
  }
}

namespace {

awaitable<void> uncovered_read() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, &uncovered_then_good));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  Connection& c = **connection;
  std::vector<std::byte> into(8192);
  Status first = co_await c.read(0, into);
  REQUIRE_FALSE(first);
  CHECK(contains(first.error().message, "uncovered"));
  Status second = co_await c.read(8192, into);
  CHECK(second);
  CHECK(into[0] == std::byte{9});
  co_await c.disconnect();
  Status served = co_await serving.join();
  CHECK(served);
}

awaitable<void> read_error() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, &read_error_then_write));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  Connection& c = **connection;
  std::vector<std::byte> into(65536);
  Status read = co_await c.read(1 << 20, into);
  REQUIRE_FALSE(read);
  CHECK(read.error().code == std::errc::io_error);
  CHECK(contains(read.error().message, "READ at offset 1052672"));
  CHECK(contains(read.error().message, "EIO"));
  CHECK(contains(read.error().message, "bad sector"));
  auto data = filled(4096, 5);
  Status written = co_await c.write(0, std::span<const std::byte>(data));
  CHECK(written);
  co_await c.disconnect();
  Status served = co_await serving.join();
  CHECK(served);
}

}  // namespace

TEST_CASE("NBD client: a READ that DONE leaves partly uncovered fails alone; the connection goes on") {
  test::run(uncovered_read());
}

TEST_CASE("NBD client: an ERROR_OFFSET chunk fails the READ with the server's words; the connection goes on") {
  test::run(read_error());
}

namespace {

// Receives two WRITEs, checks them, and answers only once the client has let go of
// the first one's buffer (it was sent: the kernel has the bytes).
struct WriteCheck {
  Buffer* watched = nullptr;  // a handle the test keeps on the first write's block
  bool released_before_reply = false;
  std::vector<std::byte> payloads[2];
  RequestHeader headers[2];
};

awaitable<Status> two_writes(FakeServer& server, WriteCheck& check) {
  for (int i = 0; i < 2; ++i) {
    auto header = co_await server.request(&check.payloads[i]);
    if (!header) co_return tl::unexpected(header.error());
    check.headers[i] = *header;
  }
  auto ex = co_await asio::this_coro::executor;
  for (int spin = 0; spin < 1000 && check.watched->references() != 1; ++spin) co_await asio::post(ex, asio::use_awaitable);
  check.released_before_reply = check.watched->references() == 1;
  for (int i = 0; i < 2; ++i) {
    auto reply = simple_reply(check.headers[i].cookie);
    if (Status s = co_await server.send(reply); !s) co_return s;
  }
  auto disc = co_await server.request();
  co_return disc ? Status{} : Status(tl::unexpected(disc.error()));
}

awaitable<Status> serve_writes(FakeServer& server, WriteCheck& check) {
  FakeServerOptions simple;
  simple.structured_replies = false;
  if (Status s = co_await server.handshake(simple); !s) co_return s;
  co_return co_await two_writes(server, check);
}

awaitable<void> writes() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  WriteCheck check;
  // One write with headroom for its header, one without (a share at offset 0 of a
  // block without headroom): both must reach the server intact.
  Buffer with_room = Buffer::allocate(65536, 4096);
  std::memset(with_room.writable().data(), 0x61, with_room.size());
  Buffer watched = with_room.share(0, with_room.size());
  check.watched = &watched;
  Buffer no_room = Buffer::allocate(8192, 0);
  std::memset(no_room.writable().data(), 0x62, no_room.size());
  CHECK(no_room.headroom() == 0);

  TaskGroup serving(ex);
  serving.spawn(serve_writes(server, check));
  auto connection = co_await connect(std::move(sockets.first), false);
  REQUIRE(connection);
  Connection& c = **connection;
  std::optional<Status> first, second;
  TaskGroup requests(ex);
  requests.spawn(keep(c.write(1 << 20, std::move(with_room)), &first));
  requests.spawn(keep(c.write(4096, std::move(no_room)), &second));
  co_await requests.join();
  CHECK(*first);
  CHECK(*second);
  co_await c.disconnect();
  Status served = co_await serving.join();
  CHECK(served);

  CHECK(check.released_before_reply);
  CHECK(check.headers[0].command == Command::write);
  CHECK(check.headers[0].offset == (1 << 20));
  CHECK(check.headers[0].length == 65536);
  CHECK(check.payloads[0] == filled(65536, 0x61));
  CHECK(check.headers[1].offset == 4096);
  CHECK(check.payloads[1] == filled(8192, 0x62));
  CHECK(check.headers[0].cookie != check.headers[1].cookie);
}

}  // namespace

TEST_CASE("NBD client: WRITE header and payload arrive intact, with and without headroom; the buffer is freed once sent") {
  test::run(writes());
}

namespace {

// Reads one request and never answers.
awaitable<Status> silent(FakeServer& server) {
  co_await server.request();
  std::array<std::byte, 1> nothing{};
  co_await server.stream().read_some(nothing);  // until the client hangs up
  co_return Status{};
}

awaitable<void> aborted(bool by_timeout) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, &silent));
  auto connection = co_await connect(std::move(sockets.first), true, by_timeout ? 1 : 0);
  REQUIRE(connection);
  Connection& c = **connection;
  std::vector<std::byte> into(4096);
  std::optional<Status> result;
  TaskGroup reads(ex);
  reads.spawn(keep(c.read(0, into), &result));
  if (!by_timeout) {
    asio::steady_timer settle(ex, std::chrono::milliseconds(50));
    co_await settle.async_wait(use_nothrow);
    CHECK(c.in_flight() == 1);
    c.abort();
  }
  co_await reads.join();
  REQUIRE(result);
  REQUIRE_FALSE(*result);
  if (by_timeout) {
    CHECK(result->error().code == std::errc::timed_out);
    CHECK(contains(result->error().message, "NBD READ of 4096 bytes at offset 0 failed: no reply from"));
  } else {
    CHECK(result->error().is_cancellation());
  }
  CHECK(c.in_flight() == 0);
  co_await c.disconnect();
  co_await serving.join();
}

// GO is not understood: EXPORT_NAME, and the spec's default block sizes.
awaitable<Status> nothing_more(FakeServer& server) {
  auto disc = co_await server.request();
  co_return disc ? Status{} : Status(tl::unexpected(disc.error()));
}

awaitable<void> export_name_fallback() {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions old;
  old.go = false;
  old.size = 12345 * 512;
  TaskGroup serving(ex);
  serving.spawn(serve(server, old, &nothing_more));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  const NegotiatedExport& facts = (*connection)->facts();
  CHECK(facts.export_name_fallback);
  CHECK(facts.size == 12345 * 512);
  CHECK_FALSE(facts.block_sizes_advertised);
  CHECK(facts.block_sizes.minimum == 512);
  CHECK(facts.block_sizes.maximum == (32u << 20));
  co_await (*connection)->disconnect();
  Status served = co_await serving.join();
  CHECK(served);
}

// The handshake times its option round trips: the quickest stands for the link.
awaitable<void> measured_round_trip(std::chrono::milliseconds delay) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions far;
  far.option_delay = delay;
  TaskGroup serving(ex);
  serving.spawn(serve(server, far, &nothing_more));
  auto connection = co_await connect(std::move(sockets.first), true);
  REQUIRE(connection);
  const auto round_trip = (*connection)->facts().round_trip;
  CHECK(round_trip >= delay);
  CHECK(round_trip.count() > 0);
  CHECK(round_trip < delay + std::chrono::seconds(2));
  co_await (*connection)->disconnect();
  CHECK(co_await serving.join());
}

// The options go out in libnbd's order, and only those the connection needs: a source
// asks for the allocation map, a destination does not; with TLS, STARTTLS comes first
// and a server that refuses it gets nothing more than ABORT.
awaitable<void> option_order(bool tls, bool allocation_map, std::vector<Option> expected) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  TaskGroup serving(ex);
  serving.spawn(serve(server, FakeServerOptions{}, &nothing_more));
  ClientOptions options;
  options.allocation_map = allocation_map;
  if (tls) {
    options.tls = true;
    auto context = TlsContext::create(TlsRole::client, TlsOptions{});
    REQUIRE(context);
    options.tls_context = *context;
  }
  auto negotiated = co_await negotiate(std::make_unique<SocketStream>(std::move(sockets.first)), options);
  if (tls) {
    REQUIRE_FALSE(negotiated);
    CHECK(contains(negotiated.error().message, "server refused STARTTLS: option not supported (NBD_REP_ERR_UNSUP)"));
    CHECK(contains(negotiated.error().message, "TLS is required"));
    server.stream().abort();
  } else {
    REQUIRE(negotiated);
    Connection connection(ex, std::move(negotiated->stream), std::move(negotiated->facts), std::chrono::seconds(0));
    connection.start();
    co_await connection.disconnect();
  }
  co_await serving.join();
  CHECK(server.options_seen() == expected);
}

awaitable<void> advertised_sizes(BlockSizes sizes, bool valid) {
  auto ex = co_await asio::this_coro::executor;
  auto sockets = test::socket_pair(ex);
  FakeServer server(std::move(sockets.second));
  FakeServerOptions options;
  options.block_sizes = sizes;
  TaskGroup serving(ex);
  serving.spawn(serve(server, options, &nothing_more));
  auto connection = co_await connect(std::move(sockets.first), true);
  if (valid) {
    REQUIRE(connection);
    CHECK((*connection)->facts().block_sizes_advertised);
    CHECK((*connection)->facts().block_sizes.minimum == sizes.minimum);
    CHECK((*connection)->facts().block_sizes.maximum == sizes.maximum);
    co_await (*connection)->disconnect();
  } else {
    REQUIRE_FALSE(connection);
    CHECK(contains(connection.error().message, "advertised NBD block sizes"));
    server.stream().abort();
  }
  co_await serving.join();
}

}  // namespace

TEST_CASE("NBD client: abort() fails the request in flight as a cancellation; disconnect() waits for the reader") {
  test::run(aborted(false));
}

TEST_CASE("NBD client: a server that stops answering fails the request after the timeout") {
  test::run(aborted(true));
}

TEST_CASE("NBD client handshake: EXPORT_NAME where GO is not understood; block sizes obeyed or refused") {
  test::run(export_name_fallback());
  test::run(advertised_sizes(BlockSizes{65536, 65536, 1u << 20}, true));
  test::run(advertised_sizes(BlockSizes{3, 4096, 1u << 20}, false));
}

TEST_CASE("NBD client handshake: options in libnbd's order, only those needed") {
  test::run(option_order(false, true, {Option::structured_reply, Option::set_meta_context, Option::go}));
  test::run(option_order(false, false, {Option::structured_reply, Option::go}));
  test::run(option_order(true, true, {Option::starttls, Option::abort}));
}

TEST_CASE("NBD client handshake: the option round trip is measured") {
  test::run(measured_round_trip(std::chrono::milliseconds(0)));
  test::run(measured_round_trip(std::chrono::milliseconds(30)));
}

TEST_CASE("NBD URIs: schemes, export names, sockets and TLS parameters") {
  auto target = [](std::string_view text) {
    auto uri = parse_uri(text);
    REQUIRE(uri);
    return parse_target(*uri);
  };
  auto t = target("nbd://example.com/disk%20one");
  REQUIRE(t);
  CHECK(t->address.kind == NetAddress::Kind::tcp);
  CHECK(t->address.host == "example.com");
  CHECK(t->address.port == 10809);
  CHECK(t->export_name == "disk one");
  CHECK_FALSE(t->tls);
  CHECK(t->display == "nbd://example.com:10809/disk one");

  t = target("nbd://h//abs");
  REQUIRE(t);
  CHECK(t->export_name == "/abs");
  t = target("nbd://[::1]:1234");
  REQUIRE(t);
  CHECK(t->address.host == "::1");
  CHECK(t->address.port == 1234);
  CHECK(t->export_name.empty());

  t = target("nbds+unix://alice@/e?socket=/run/s.sock&tls-psk-file=/k.psk&tls-verify-peer=false");
  REQUIRE(t);
  CHECK(t->tls);
  CHECK(t->address.kind == NetAddress::Kind::unix_socket);
  CHECK(t->address.path == "/run/s.sock");
  CHECK(t->export_name == "e");
  CHECK(t->tls_options.psk_file == "/k.psk");
  CHECK(t->tls_options.psk_identity == "alice");
  CHECK_FALSE(t->tls_options.verify_peer);
  CHECK(t->tls_hostname.empty());  // a Unix socket has no host name to check

  t = target("nbds://h/?tls-hostname=other.example");
  REQUIRE(t);
  CHECK(t->tls_hostname == "other.example");

  CHECK_FALSE(target("nbd+unix:///e"));                        // no socket
  CHECK_FALSE(target("nbd://h/e?socket=/x"));                  // socket on TCP
  CHECK_FALSE(target("nbd://h/e?tls-certificates=/no/such"));  // missing directory
  CHECK_FALSE(target("nbd://h/e?tls-verify-peer=maybe"));
  auto unknown = target("nbd://h/e?colour=blue");
  REQUIRE_FALSE(unknown);
  CHECK(contains(unknown.error().message, "unknown parameter 'colour'"));
}
