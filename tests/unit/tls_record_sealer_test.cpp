// A TLS 1.3 client seals its own records (TlsRecordSealer): OpenSSL on the other end
// must decrypt every byte as sent, in every suite, across key updates of our own and
// ones the peer asks for, and the close must read as a clean close_notify.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "loopback_pair.hpp"
#include "run_loop.hpp"
#include "temp_dir.hpp"
#include "test_certificates.hpp"
#include "tls_test_contexts.hpp"

using namespace sluice;

namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed) >> 3);
  return bytes;
}

struct Outcome {
  bool client_seals = false;
  bool server_seals = false;
  std::uint64_t key_updates = 0;
  std::uint64_t records = 0;
  std::vector<std::byte> received;
  std::size_t after_close = 1;  // what the server's read returns once the client closed
};

awaitable<Status> receive_all(Stream& stream, std::size_t n, std::vector<std::byte>* into) {
  into->resize(n);
  co_return co_await stream.read_exactly(*into);
}

// Sends `frames` from the client (each a header in front of a payload, contiguous or
// not), then closes; the server reads it all and then the close.
awaitable<Result<Outcome>> exchange(test::TlsContexts contexts, std::vector<std::vector<std::byte>> frames,
                                    bool peer_asks_update) {
  auto pair = co_await test::connected_pair(contexts.client, contexts.server);
  if (!pair) co_return tl::unexpected(pair.error());
  auto& client = static_cast<TlsStream&>(*pair->client);
  auto& server = static_cast<TlsStream&>(*pair->server);
  Outcome outcome;
  outcome.client_seals = client.seals_own_records();
  outcome.server_seals = server.seals_own_records();
  if (peer_asks_update) {
    // The server asks for a key update along with a message; the client reads it,
    // and must answer with its own KeyUpdate before its next record.
    REQUIRE(SSL_key_update(server.native_handle(), SSL_KEY_UPDATE_REQUESTED) == 1);
    const std::vector<std::byte> hello = pattern(10, 9);
    if (Status s = co_await server.send(Frame{{}, hello}); !s) co_return tl::unexpected(s.error());
    std::vector<std::byte> got(hello.size());
    if (Status s = co_await client.read_exactly(got); !s) co_return tl::unexpected(s.error());
    CHECK(got == hello);
  }
  std::size_t total = 0;
  for (const auto& f : frames) total += f.size();
  auto ex = co_await asio::this_coro::executor;
  TaskGroup readers(ex);
  readers.spawn(receive_all(server, total, &outcome.received));
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::span<const std::byte> whole(frames[i]);
    // Odd frames: a header that is not in front of its payload, which the stream stages.
    Frame frame = i % 2 == 0 ? Frame{whole.first(std::min<std::size_t>(9, whole.size())),
                                     whole.subspan(std::min<std::size_t>(9, whole.size()))}
                             : Frame{{}, whole};
    if (Status s = co_await client.send(frame); !s) co_return tl::unexpected(s.error());
  }
  if (Status s = co_await readers.join(); !s) co_return tl::unexpected(s.error());
  outcome.key_updates = client.key_updates();
  outcome.records = client.stats().tls_records;
  if (Status s = co_await client.close(); !s) co_return tl::unexpected(s.error());
  std::array<std::byte, 16> rest{};
  auto n = co_await server.read_some(rest);
  if (!n) co_return tl::unexpected(n.error());
  outcome.after_close = *n;
  co_return outcome;
}

std::vector<std::byte> concatenated(const std::vector<std::vector<std::byte>>& frames) {
  std::vector<std::byte> all;
  for (const auto& f : frames) all.insert(all.end(), f.begin(), f.end());
  return all;
}

std::vector<std::vector<std::byte>> sample_frames() {
  // Sizes around the 16 KiB record limit, a large one, and tiny ones.
  std::vector<std::vector<std::byte>> frames;
  unsigned seed = 1;
  for (std::size_t n : {std::size_t{1}, std::size_t{28}, std::size_t{16383}, std::size_t{16384}, std::size_t{16385},
                        std::size_t{1} << 20, std::size_t{65536 + 3}, std::size_t{12}})
    frames.push_back(pattern(n, seed++));
  return frames;
}

Outcome run_exchange(TlsOptions client, bool peer_asks_update = false) {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  auto contexts = test::tls_contexts(certs, client);
  REQUIRE(contexts);
  auto outcome = test::run(exchange(*contexts, sample_frames(), peer_asks_update));
  INFO((outcome ? std::string() : outcome.error().message));
  REQUIRE(outcome);
  return *outcome;
}

}  // namespace

TEST_CASE("a TLS 1.3 client's own records decrypt at an OpenSSL server, in every suite") {
  for (const char* suite : {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}) {
    CAPTURE(suite);
    TlsOptions client;
    client.ciphersuites = suite;
    const Outcome outcome = run_exchange(client);
    CHECK(outcome.client_seals);
    CHECK_FALSE(outcome.server_seals);  // a server leaves its records to OpenSSL
    CHECK(outcome.received == concatenated(sample_frames()));
    CHECK(outcome.key_updates == 0);
    CHECK(outcome.after_close == 0);  // close_notify: a clean end, not a reset
  }
}

TEST_CASE("the sealer moves to a new key after records_per_key records, and the server follows") {
  TlsOptions client;
  client.records_per_key = 5;
  const Outcome outcome = run_exchange(client);
  REQUIRE(outcome.client_seals);
  CHECK(outcome.received == concatenated(sample_frames()));
  // 1 MiB alone is 64 records: at least 12 updates, each a record of its own.
  CHECK(outcome.key_updates >= 12);
  CHECK(outcome.records > 64 + outcome.key_updates);
  CHECK(outcome.after_close == 0);
}

TEST_CASE("a KeyUpdate the server asks for is answered before the client's next record") {
  TlsOptions client;
  const Outcome outcome = run_exchange(client, true);
  REQUIRE(outcome.client_seals);
  CHECK(outcome.key_updates == 1);
  CHECK(outcome.received == concatenated(sample_frames()));
  CHECK(outcome.after_close == 0);
}

TEST_CASE("OpenSSL keeps the records with own_records off, and under TLS 1.2") {
  TlsOptions off;
  off.own_records = false;
  const Outcome without = run_exchange(off);
  CHECK_FALSE(without.client_seals);
  CHECK(without.received == concatenated(sample_frames()));
  TlsOptions tls12;
  tls12.tls12_only = true;
  const Outcome old = run_exchange(tls12);
  CHECK_FALSE(old.client_seals);
  CHECK(old.received == concatenated(sample_frames()));
  CHECK(old.after_close == 0);
}
