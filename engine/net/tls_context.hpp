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
extern const std::string default_tls13_ciphersuites;
extern const std::string default_tls12_ciphers;

}  // namespace sluice
