#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <fstream>
#include <vector>

#include "engine/buffer.hpp"
#include "engine/net/address.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/task_group.hpp"
#include "loopback_pair.hpp"
#include "run_loop.hpp"
#include "temp_dir.hpp"
#include "test_certificates.hpp"

using namespace sluice;

namespace {

using test::connected_pair;
using test::Pair;

// Reads on the server's end what the senders should have made arrive, waits for the
// senders, and compares.
awaitable<Status> expect_received(Pair& pair, TaskGroup& senders, const std::vector<std::byte>& expected) {
  std::vector<std::byte> received(expected.size());
  Status got = co_await pair.server->read_exactly(received);
  if (Status s = co_await senders.join(); !s) co_return s;
  if (!got) co_return got;
  CHECK(received == expected);
  co_return Status{};
}

// Sends `count` frames of `size` bytes with a 12-byte header (in headroom when
// `contiguous`), reads them back on the other end and compares.
awaitable<Status> exchange(Pair& pair, int count, std::size_t size, bool contiguous) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::byte> expected;
  std::vector<Buffer> payloads;
  std::vector<std::array<std::byte, 12>> loose(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    Buffer b = Buffer::allocate(size, 4096);
    for (std::size_t j = 0; j < size; ++j) b.writable()[j] = std::byte(static_cast<unsigned char>(j * 7 + static_cast<std::size_t>(i)));
    auto head = contiguous ? b.prefix(12) : std::span<std::byte>(loose[static_cast<std::size_t>(i)]);
    for (std::size_t j = 0; j < 12; ++j) head[j] = std::byte(static_cast<unsigned char>(0xA0 + j));
    expected.insert(expected.end(), head.begin(), head.end());
    expected.insert(expected.end(), b.bytes().begin(), b.bytes().end());
    payloads.push_back(std::move(b));
  }
  TaskGroup senders(ex);
  for (int i = 0; i < count; ++i) {
    auto& b = payloads[static_cast<std::size_t>(i)];
    Frame frame{contiguous ? std::span<const std::byte>(b.prefix(12))
                           : std::span<const std::byte>(loose[static_cast<std::size_t>(i)]),
                b.bytes()};
    senders.spawn(pair.client->send(frame));
  }
  co_return co_await expect_received(pair, senders, expected);
}

// A 3 MiB file of noise, open for reading: the source of the spliced payloads.
struct NoiseFile {
  explicit NoiseFile(unsigned seed) : content(test::noise(3u << 20, seed)) {
    test::write_at(dir.file("payload.img"), 0, content);
    fd = ::open(dir.file("payload.img").c_str(), O_RDONLY);
  }
  ~NoiseFile() {
    if (fd >= 0) ::close(fd);
  }
  // Appends the file's bytes [from, from + n) to `bytes`.
  void append_to(std::vector<std::byte>& bytes, std::size_t from, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) bytes.push_back(std::byte(static_cast<unsigned char>(content[from + i])));
  }
  NoiseFile(const NoiseFile&) = delete;
  NoiseFile& operator=(const NoiseFile&) = delete;
  test::TempDir dir;
  std::vector<char> content;
  int fd = -1;
};

}  // namespace

TEST_CASE("plain TCP: frames arrive whole and in order, gathered into few writes") {
  auto task = [&]() -> awaitable<Status> {
    auto pair = co_await connected_pair();
    if (!pair) co_return tl::unexpected(pair.error());
    if (Status s = co_await exchange(*pair, 50, 65536, true); !s) co_return s;
    if (Status s = co_await exchange(*pair, 20, 4096, false); !s) co_return s;
    CHECK(pair->client->stats().socket_writes < 70);  // concurrent senders were batched
    CHECK(pair->client->stats().tcp_segments > 0);
    // The cork that held segments back while frames were queued is off once the burst
    // is out: a tail left corked would wait up to 200 ms.
    int corked = -1;
    socklen_t size = sizeof corked;
    CHECK(::getsockopt(pair->client->socket_fd(), IPPROTO_TCP, TCP_CORK, &corked, &size) == 0);
    CHECK(corked == 0);
    co_await pair->client->close();
    std::byte one{};
    auto eof = co_await pair->server->read_some({&one, 1});
    CHECK(eof);
    if (eof) CHECK(*eof == 0);
    co_return Status{};
  };
  CHECK(test::run(task()));
}

TEST_CASE("plain TCP: payloads spliced from a file arrive between memory frames, in order") {
  NoiseFile file(5);
  REQUIRE(file.fd >= 0);
  auto task = [&]() -> awaitable<Status> {
    auto pair = co_await connected_pair();
    if (!pair) co_return tl::unexpected(pair.error());
    CHECK(pair->client->splices());
    const std::array<std::byte, 4> a{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
    const std::array<std::byte, 2> b{std::byte{9}, std::byte{8}};
    TaskGroup senders(co_await asio::this_coro::executor);
    senders.spawn(pair->client->send(Frame{a, {}, FileSlice{file.fd, 1000, 2u << 20}}));
    senders.spawn(pair->client->send(Frame{b, b, {}}));
    senders.spawn(pair->client->send(Frame{{}, {}, FileSlice{file.fd, 7, 100000}}));
    std::vector<std::byte> expected(a.begin(), a.end());
    file.append_to(expected, 1000, 2u << 20);
    expected.insert(expected.end(), b.begin(), b.end());
    expected.insert(expected.end(), b.begin(), b.end());
    file.append_to(expected, 7, 100000);
    co_return co_await expect_received(*pair, senders, expected);
  };
  CHECK(test::run(task()));
}

TEST_CASE("plain TCP: a spliced frame's header rides ahead of its payload whatever was gathered before it") {
  // The ways a header meets a spliced payload: alone, after a large memory frame
  // (which goes out first, the header still rides), and too large itself to ride in the
  // pipe (it goes out with what came before it). Checked with a print on each branch:
  // all three are taken, in that order, on every run.
  NoiseFile file(9);
  REQUIRE(file.fd >= 0);
  const int fd = file.fd;
  auto task = [&]() -> awaitable<Status> {
    auto pair = co_await connected_pair();
    if (!pair) co_return tl::unexpected(pair.error());
    auto pattern = [](std::size_t n, unsigned seed) {
      std::vector<std::byte> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<unsigned char>(i * 13 + seed));
      return v;
    };
    const auto large_body = pattern(64 * 1024, 1), head1 = pattern(28, 2), large_head = pattern(5000, 3),
               small1 = pattern(12, 4), head3 = pattern(12, 5);
    std::vector<std::byte> expected;
    auto add = [&](std::span<const std::byte> b) { expected.insert(expected.end(), b.begin(), b.end()); };
    auto add_file = [&](std::size_t from, std::size_t n) { file.append_to(expected, from, n); };
    TaskGroup senders(co_await asio::this_coro::executor);
    // The first frame goes out at once; the others queue behind it and leave as one
    // batch, in which the three cases meet.
    senders.spawn(pair->client->send(Frame{head1, {}, FileSlice{fd, 4096, 1u << 20}}));
    senders.spawn(pair->client->send(Frame{small1, large_body, {}}));
    senders.spawn(pair->client->send(Frame{head3, {}, FileSlice{fd, 0, 5000}}));
    senders.spawn(pair->client->send(Frame{large_head, {}, FileSlice{fd, 333, 70000}}));
    senders.spawn(pair->client->send(Frame{small1, {}, {}}));
    senders.spawn(pair->client->send(Frame{head1, {}, FileSlice{fd, (2u << 20) + 1, (1u << 20) - 1}}));
    add(head1), add_file(4096, 1u << 20);
    add(small1), add(large_body), add(head3), add_file(0, 5000);
    add(large_head), add_file(333, 70000);
    add(small1), add(head1), add_file((2u << 20) + 1, (1u << 20) - 1);
    if (Status same = co_await expect_received(*pair, senders, expected); !same) co_return same;
    CHECK(pair->client->stats().bytes_sent == expected.size());
    co_return Status{};
  };
  CHECK(test::run(task()));
}

TEST_CASE("TLS: a 2 MiB chunk with its header costs the minimum number of records") {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  TlsOptions client_options;
  client_options.ca_file = certs.path("ca-cert.pem");
  TlsOptions server_options;
  server_options.certificate = certs.path("server-cert.pem");
  server_options.private_key = certs.path("server-key.pem");
  for (bool contiguous : {true, false}) {
    CAPTURE(contiguous);
    auto task = [&]() -> awaitable<Status> {
      auto client_tls = TlsContext::create(TlsRole::client, client_options);
      auto server_tls = TlsContext::create(TlsRole::server, server_options);
      REQUIRE(client_tls);
      REQUIRE(server_tls);
      auto pair = co_await connected_pair(*client_tls, *server_tls);
      if (!pair) co_return tl::unexpected(pair.error());
      std::vector<std::size_t> records;
      static_cast<TlsStream&>(*pair->client).observe_records([&](std::size_t r) { records.push_back(r); });
      if (Status s = co_await exchange(*pair, 3, 2u << 20, contiguous); !s) co_return s;
      // ceil((2 MiB + 12) / 16 KiB) = 129 records per chunk. The header rides in a
      // full first record with payload; only the payload's last 12 bytes spill over.
      REQUIRE(records.size() == 3 * 129);
      for (std::size_t chunk = 0; chunk < 3; ++chunk) {
        CHECK(records[chunk * 129] > 16384);
        CHECK(records[chunk * 129 + 128] < 64);
      }
      // Ciphertext leaves in large writes, not one per record.
      CHECK(pair->client->stats().socket_writes <= 12);
      co_await pair->client->close();
      co_return Status{};
    };
    CHECK(test::run(task()));
  }
}

TEST_CASE("TLS: an untrusted certificate or a wrong host name is refused clearly") {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  test::TempDir other_dir;
  test::TestCertificates other(other_dir.path());
  TlsOptions server_options;
  server_options.certificate = certs.path("server-cert.pem");
  server_options.private_key = certs.path("server-key.pem");
  auto server_tls = TlsContext::create(TlsRole::server, server_options);
  REQUIRE(server_tls);

  TlsOptions wrong_ca;
  wrong_ca.ca_file = other.path("ca-cert.pem");
  auto client_tls = TlsContext::create(TlsRole::client, wrong_ca);
  REQUIRE(client_tls);
  asio::io_context context(1);  // outlives the streams below
  auto pair = test::run(context, connected_pair(*client_tls, *server_tls));
  REQUIRE_FALSE(pair);
  CHECK(pair.error().message.find("certificate verification failed") != std::string::npos);

  TlsOptions right_ca;
  right_ca.ca_file = certs.path("ca-cert.pem");
  auto named = TlsContext::create(TlsRole::client, right_ca);
  REQUIRE(named);
  pair = test::run(context, connected_pair(*named, *server_tls, "not-localhost.example"));
  REQUIRE_FALSE(pair);
  CHECK(pair.error().message.find("hostname mismatch") != std::string::npos);

  TlsOptions no_verify;
  no_verify.verify_peer = false;
  no_verify.ca_file = other.path("ca-cert.pem");
  auto trusting = TlsContext::create(TlsRole::client, no_verify);
  REQUIRE(trusting);
  pair = test::run(context, connected_pair(*trusting, *server_tls));
  CHECK(pair);
}

TEST_CASE("TLS with a pre-shared key, in nbdkit's key file format") {
  test::TempDir dir;
  std::ofstream(dir.file("keys.psk")) << "alice:0123456789abcdef0123456789abcdef\n";
  std::ofstream(dir.file("wrong.psk")) << "alice:ffffffffffffffffffffffffffffffff\n";
  TlsOptions server_options;
  server_options.psk_file = dir.file("keys.psk");
  auto server_tls = TlsContext::create(TlsRole::server, server_options);
  REQUIRE(server_tls);
  TlsOptions client_options;
  client_options.psk_file = dir.file("keys.psk");
  auto client_tls = TlsContext::create(TlsRole::client, client_options);
  REQUIRE(client_tls);
  auto task = [&]() -> awaitable<Status> {
    auto pair = co_await connected_pair(*client_tls, *server_tls, "");
    if (!pair) co_return tl::unexpected(pair.error());
    co_return co_await exchange(*pair, 4, 100000, false);
  };
  CHECK(test::run(task()));

  client_options.psk_file = dir.file("wrong.psk");
  auto wrong = TlsContext::create(TlsRole::client, client_options);
  REQUIRE(wrong);
  asio::io_context context(1);
  auto pair = test::run(context, connected_pair(*wrong, *server_tls, ""));
  CHECK_FALSE(pair);
}
