// Which cipher a Sluice TLS connection ends up with: AES-128-GCM unless someone asks for
// otherwise, and the server's preference wins over a client that lists AES-256 first.
#include <doctest/doctest.h>

#include "loopback_pair.hpp"
#include "run_loop.hpp"
#include "temp_dir.hpp"
#include "test_certificates.hpp"
#include "tls_test_contexts.hpp"

using namespace sluice;

namespace {

struct Negotiated {
  std::string client;
  std::string server;
};

awaitable<Result<Negotiated>> handshake_pair(std::shared_ptr<TlsContext> client, std::shared_ptr<TlsContext> server) {
  auto pair = co_await test::connected_pair(client, server);
  if (!pair) co_return tl::unexpected(pair.error());
  co_return Negotiated{static_cast<TlsStream&>(*pair->client).cipher(),
                       static_cast<TlsStream&>(*pair->server).cipher()};
}

// Handshakes once over loopback and reports the suite each side settled on.
Negotiated negotiate(TlsOptions client_options, TlsOptions server_options) {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  auto contexts = test::tls_contexts(certs, client_options, server_options);
  REQUIRE(contexts);
  auto negotiated = test::run(handshake_pair(contexts->client, contexts->server));
  INFO((negotiated ? std::string() : negotiated.error().message));
  REQUIRE(negotiated);
  CHECK(negotiated->client == negotiated->server);
  return *negotiated;
}

}  // namespace

TEST_CASE("TLS 1.3 between Sluice's ends settles on AES-128-GCM by default") {
  CHECK(negotiate({}, {}).client == "TLS_AES_128_GCM_SHA256");
}

TEST_CASE("Sluice's server picks AES-128-GCM even when the client lists AES-256-GCM first") {
  TlsOptions client;
  client.ciphersuites = "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256";
  CHECK(negotiate(client, {}).server == "TLS_AES_128_GCM_SHA256");
}

TEST_CASE("a client that offers only AES-256-GCM gets it") {
  TlsOptions client;
  client.ciphersuites = "TLS_AES_256_GCM_SHA384";
  CHECK(negotiate(client, {}).server == "TLS_AES_256_GCM_SHA384");
}

TEST_CASE("the server's own --tls-ciphersuites order is the one that counts") {
  TlsOptions client;
  client.ciphersuites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
  TlsOptions server;
  server.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256";
  CHECK(negotiate(client, server).server == "TLS_CHACHA20_POLY1305_SHA256");
}

TEST_CASE("TLS 1.2 (--tls12) settles on an ECDHE AES-128-GCM suite by default") {
  TlsOptions client;
  client.tls12_only = true;
  const std::string cipher = negotiate(client, {}).client;
  CHECK(cipher.rfind("ECDHE-", 0) == 0);
  CHECK(cipher.find("AES128-GCM") != std::string::npos);
}

TEST_CASE("a cipher list or suite OpenSSL does not know is refused with its text") {
  TlsOptions bad_suites;
  bad_suites.ciphersuites = "TLS_NO_SUCH_SUITE";
  auto context = TlsContext::create(TlsRole::client, bad_suites);
  REQUIRE_FALSE(context);
  CHECK(context.error().message.find("TLS_NO_SUCH_SUITE") != std::string::npos);

  TlsOptions bad_list;
  bad_list.ciphers = "NO-SUCH-CIPHER";
  context = TlsContext::create(TlsRole::client, bad_list);
  REQUIRE_FALSE(context);
  CHECK(context.error().message.find("NO-SUCH-CIPHER") != std::string::npos);
}

TEST_CASE("ends with no suite in common fail the handshake with a hint at the options") {
  test::TempDir dir;
  test::TestCertificates certs(dir.path());
  TlsOptions client;
  client.ca_file = certs.path("ca-cert.pem");
  client.ciphersuites = "TLS_AES_256_GCM_SHA384";
  TlsOptions server;
  server.certificate = certs.path("server-cert.pem");
  server.private_key = certs.path("server-key.pem");
  server.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256";
  auto client_tls = TlsContext::create(TlsRole::client, client);
  auto server_tls = TlsContext::create(TlsRole::server, server);
  REQUIRE(client_tls);
  REQUIRE(server_tls);
  auto negotiated = test::run(handshake_pair(*client_tls, *server_tls));
  REQUIRE_FALSE(negotiated);
  const std::string& message = negotiated.error().message;
  INFO(message);
  CHECK(message.find("handshake failure") != std::string::npos);  // OpenSSL's own words stay
  CHECK(message.find("no cipher suite or TLS version in common with the peer (--tls-ciphers") != std::string::npos);
}
