#include "apps/sluice/tls_flags.hpp"

namespace sluice::cli {

namespace {

OptionSpec file_flag(const char* name, const char* help, std::string& into) {
  return {{name}, Takes::value, "FILE", help, [&into](const char* value) { into = value; }};
}

}  // namespace

std::vector<OptionSpec> tls_flags(TlsOptions& tls, TlsSide side) {
  const bool client = side == TlsSide::client;
  std::vector<OptionSpec> flags = {
      file_flag("tls-ca", client ? "trust these CAs (default: the system's)"
                                 : "require client certificates signed by this CA",
                tls.ca_file),
      file_flag("tls-cert", client ? "a client certificate" : "the server's certificate", tls.certificate),
      file_flag("tls-key", client ? "the client certificate's key" : "the server's key", tls.private_key),
      file_flag("tls-psk-file", "pre-shared keys, identity:hexkey lines", tls.psk_file),
      {{"tls-ciphers"}, Takes::value, "LIST", "TLS 1.2 cipher list (OpenSSL's syntax)",
       [&tls](const char* value) { tls.ciphers = value; }},
      {{"tls-ciphersuites"}, Takes::value, "LIST", "TLS 1.3 cipher suites (OpenSSL's syntax)",
       [&tls](const char* value) { tls.ciphersuites = value; }},
      {{"tls12"}, Takes::nothing, "", "TLS 1.2 only", [&tls](const char*) { tls.tls12_only = true; }},
  };
  if (client) {
    flags.push_back({{"tls-no-verify"}, Takes::nothing, "", "do not verify the server's certificate or name",
                     [&tls](const char*) { tls.verify_peer = false; }});
    flags.push_back({{"tls-hostname"}, Takes::value, "NAME", "the name to send (SNI) and verify",
                     [&tls](const char* value) { tls.hostname = value; }});
  }
  return flags;
}

}  // namespace sluice::cli
