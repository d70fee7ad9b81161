// Test helper: a client and a server TlsContext that trust each other through
// TestCertificates, each made from options the test may have set first.
#pragma once

#include <memory>

#include "engine/net/tls_context.hpp"
#include "test_certificates.hpp"

namespace sluice::test {

struct TlsContexts {
  std::shared_ptr<TlsContext> client;
  std::shared_ptr<TlsContext> server;
};

inline Result<TlsContexts> tls_contexts(const TestCertificates& certs, TlsOptions client = {},
                                        TlsOptions server = {}) {
  client.ca_file = certs.path("ca-cert.pem");
  server.certificate = certs.path("server-cert.pem");
  server.private_key = certs.path("server-key.pem");
  auto client_tls = TlsContext::create(TlsRole::client, client);
  if (!client_tls) return tl::unexpected(client_tls.error());
  auto server_tls = TlsContext::create(TlsRole::server, server);
  if (!server_tls) return tl::unexpected(server_tls.error());
  return TlsContexts{*client_tls, *server_tls};
}

}  // namespace sluice::test
