// TlsContext: an OpenSSL SSL_CTX configured from TlsOptions, for one role.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "engine/error.hpp"
#include "engine/net/tls_options.hpp"

namespace sluice {

enum class TlsRole { client, server };

class TlsContext {
 public:
  static Result<std::shared_ptr<TlsContext>> create(TlsRole role, const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_; }
  TlsRole role() const { return role_; }
  const TlsOptions& options() const { return options_; }

  // PSK lookups for OpenSSL's callbacks.
  const std::vector<unsigned char>* psk_key(const std::string& identity) const;
  const std::string& psk_client_identity() const { return psk_identity_; }

 private:
  TlsContext(TlsRole role, TlsOptions options, SSL_CTX* ctx);
  Status load_psk_file();

  TlsRole role_;
  TlsOptions options_;
  SSL_CTX* ctx_;
  std::map<std::string, std::vector<unsigned char>> psk_keys_;
  std::string psk_identity_;
};

// The OpenSSL error queue as one line (and cleared): "error:0A000086:SSL routines::...".
std::string openssl_errors();

// What a context offers and, as a server, prefers when TlsOptions leaves the choice open.
// AES-128-GCM first, where OpenSSL lists AES-256-GCM first. A disk image costs the
// cipher on every byte, and AES-128 is the cheaper of the two (docs/benchmarks.md,
// section "AES-128-GCM first"); it is
// the suite RFC 8446 makes mandatory to implement. The rest of OpenSSL's choices stay,
// in its order. The TLS 1.2 list is spelled out because DEFAULT may only begin a list;
// `ALL:!COMPLEMENTOFDEFAULT:!eNULL` is what ciphers(1) documents DEFAULT to be.
inline constexpr const char default_tls13_ciphersuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
inline constexpr const char default_tls12_ciphers[] = "ECDHE+AESGCM+AES128:ALL:!COMPLEMENTOFDEFAULT:!eNULL";

}  // namespace sluice
