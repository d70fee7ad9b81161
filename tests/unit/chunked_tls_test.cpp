// Chunked over a real loopback TLS connection: the copier sends through a
// ChunkedDestination, the receiver decrypts straight into pooled buffers, and the
// client's record sizes show that each chunk header rides with its payload.
#include <doctest/doctest.h>

#include "engine/copier.hpp"
#include "engine/net/address.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/task_group.hpp"
#include "memory_endpoints.hpp"
#include "protocols/chunked/chunked_destination.hpp"
#include "protocols/chunked/chunked_receiver.hpp"
#include "run_loop.hpp"
#include "temp_dir.hpp"
#include "test_certificates.hpp"
#include "tls_test_contexts.hpp"

using namespace sluice;

namespace {

constexpr std::size_t tls13_overhead = 22;  // 5-byte header, content type, 16-byte tag

awaitable<Status> accept_and_receive(Acceptor* acceptor, std::shared_ptr<TlsContext> tls, test::CheckingSink* sink,
                                     std::uint64_t size, Result<ReceiveResult>* out) {
  Socket socket(co_await asio::this_coro::executor);
  auto [ec] = co_await acceptor->async_accept(socket, use_nothrow);
  if (ec) co_return fail(ec, "accept");
  SSL_CTX_set_num_tickets(tls->native(), 0);
  auto stream = co_await TlsStream::handshake(tls, std::move(socket), {});
  if (!stream) co_return tl::unexpected(stream.error());
  StreamReader reader(**stream);
  ReceiveOptions options;
  options.image_size = size;
  *out = co_await receive_chunked(reader, *sink, options);
  co_await (*stream)->close();
  co_return Status{};
}

awaitable<Status> send_image(std::shared_ptr<TlsContext> tls, NetAddress target, test::MemorySource* source,
                             std::vector<std::size_t>* records, Result<TransferStats>* out) {
  auto socket = co_await connect_to(target);
  if (!socket) co_return tl::unexpected(socket.error());
  auto stream = co_await TlsStream::handshake(tls, std::move(*socket), {}, "localhost");
  if (!stream) co_return tl::unexpected(stream.error());
  (*stream)->observe_records([records](std::size_t r) { records->push_back(r); });
  ChunkedDestination destination(std::move(*stream), source->size(), "tls");
  CopyOptions options;
  options.request_size = 2u << 20;  // the records of a full-size (vhd-tool's largest) chunk
  *out = co_await copy(*source, destination, options);
  co_return Status{};
}

}  // namespace

TEST_CASE("Chunked over TLS: no record carries a header alone; a 2 MiB chunk costs ceil((2 MiB + 12) / 16 KiB)") {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  auto contexts = test::tls_contexts(certs);
  REQUIRE(contexts);

  const std::uint64_t chunks = 6;
  const std::uint64_t size = chunks * (2u << 20);
  std::vector<Extent> map{{0, size, ExtentKind::data}};
  auto image = test::patterned(size, map);
  test::MemorySource source(image, map);
  test::CheckingSink sink(size);
  std::vector<std::size_t> records;
  Result<TransferStats> sent = fail(std::errc::io_error, "not run");
  Result<ReceiveResult> received = fail(std::errc::io_error, "not run");

  asio::io_context context(1);
  auto task = [&]() -> awaitable<Status> {
    auto ex = co_await asio::this_coro::executor;
    auto acceptor = listen_on(ex, NetAddress{NetAddress::Kind::tcp, "127.0.0.1", 0, {}});
    if (!acceptor) co_return tl::unexpected(acceptor.error());
    NetAddress target{NetAddress::Kind::tcp, "127.0.0.1", bound_port(*acceptor), {}};
    TaskGroup both(ex);
    both.spawn(accept_and_receive(&*acceptor, contexts->server, &sink, size, &received));
    both.spawn(send_image(contexts->client, target, &source, &records, &sent));
    co_return co_await both.join();
  };
  REQUIRE(test::run(context, task()));
  REQUIRE(sent);
  REQUIRE(received);
  CHECK(sink.image == image);

  // After the handshake, per chunk: 128 full records, the first of which starts with
  // the header, then one record with the payload's last 12 bytes. Then the terminator
  // and the close_notify alert.
  const std::size_t per_chunk = (2u << 20) / 16384 + 1;  // ceil((2 MiB + 12) / 16 KiB) = 129
  REQUIRE(records.size() == chunks * per_chunk + 2);
  for (std::size_t c = 0; c < chunks; ++c) {
    CAPTURE(c);
    for (std::size_t r = 0; r + 1 < per_chunk; ++r) CHECK(records[c * per_chunk + r] == 16384 + tls13_overhead);
    CHECK(records[c * per_chunk + per_chunk - 1] == 12 + tls13_overhead);
  }
  CHECK(records[chunks * per_chunk] == 12 + tls13_overhead);  // the terminator: a header with no payload
  REQUIRE(sent->tls_records);
  CHECK(*sent->tls_records >= records.size());  // the stats count the handshake too
  // Ciphertext leaves in large writes (a chunk's records together; a slow reader may
  // split them), not one write per 16 KiB record: on average at least 64 KiB each.
  REQUIRE(sent->socket_writes);
  CHECK(*sent->socket_writes <= size / (64 * 1024));
}
