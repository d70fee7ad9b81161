#include "engine/net/tls_context.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

namespace sluice {

std::string openssl_errors() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

namespace {

TlsContext* context_of(SSL* ssl) {
  return static_cast<TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
}

unsigned int psk_client_callback(SSL* ssl, const char*, char* identity, unsigned int max_identity,
                                 unsigned char* psk, unsigned int max_psk) {
  TlsContext* self = context_of(ssl);
  const std::string& name = self->psk_client_identity();
  const auto* key = self->psk_key(name);
  if (key == nullptr || name.size() + 1 > max_identity || key->size() > max_psk) return 0;
  std::memcpy(identity, name.c_str(), name.size() + 1);
  std::memcpy(psk, key->data(), key->size());
  return static_cast<unsigned int>(key->size());
}

unsigned int psk_server_callback(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_psk) {
  const auto* key = context_of(ssl)->psk_key(identity ? identity : "");
  if (key == nullptr || key->size() > max_psk) return 0;
  std::memcpy(psk, key->data(), key->size());
  return static_cast<unsigned int>(key->size());
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `hex` as bytes into `out` (emptied first); false if it is not an even number of hex
// digits. `out` is reserved up front: no reallocation leaves a copy of a key behind.
bool decode_hex(std::string_view hex, std::vector<unsigned char>& out) {
  out.clear();
  if (hex.size() % 2 != 0) return false;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]);
    const int lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(out.data(), out.size());
      out.clear();
      return false;
    }
    out.push_back(static_cast<unsigned char>(hi * 16 + lo));
  }
  return true;
}

// OpenSSL logs each secret as "LABEL <client random> <secret>", in hex. The client's
// first application traffic secret goes into the slot a TlsStream left in the SSL's
// app data, from which it seals its own records (tls_record_sealer.hpp).
void capture_client_write_secret(const SSL* ssl, const char* line) {
  constexpr std::string_view label = "CLIENT_TRAFFIC_SECRET_0 ";
  auto* slot = static_cast<std::vector<unsigned char>*>(SSL_get_app_data(const_cast<SSL*>(ssl)));
  const std::string_view text(line);
  if (slot == nullptr || !text.starts_with(label)) return;
  const std::size_t space = text.find(' ', label.size());
  if (space == std::string_view::npos) return;
  decode_hex(text.substr(space + 1), *slot);
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::create(TlsRole role, const TlsOptions& options) {
  SSL_CTX* ctx = SSL_CTX_new(role == TlsRole::client ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) return fail(std::errc::io_error, "cannot create a TLS context: " + openssl_errors());
  std::shared_ptr<TlsContext> self(new TlsContext(role, options, ctx));
  SSL_CTX_set_app_data(ctx, self.get());

  // The spec of every protocol here asks for TLS 1.2 at least; renegotiation is never
  // needed and would make the write path read.
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (options.tls12_only) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (role == TlsRole::client) SSL_CTX_set_keylog_callback(ctx, &capture_client_write_secret);

  auto bad = [&](const std::string& what) {
    return fail(std::errc::invalid_argument, what + ": " + openssl_errors());
  };
  std::string ciphers = options.ciphers.empty() ? std::string(default_tls12_ciphers) : options.ciphers;
  if (!options.psk_file.empty() && options.ciphers.empty()) ciphers += ":PSK";
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) return bad("invalid TLS cipher list '" + ciphers + "'");
  const std::string suites = options.ciphersuites.empty() ? std::string(default_tls13_ciphersuites) : options.ciphersuites;
  if (SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1)
    return bad("invalid TLS 1.3 cipher suites '" + suites + "'");
  // The server's order decides, so a client that lists AES-256 first (GnuTLS's does:
  // nbdcopy, qemu) still gets the cheaper suite when it offers it.
  if (role == TlsRole::server) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);

  if (!options.certificate.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.certificate.c_str()) != 1)
      return bad("cannot load the certificate " + options.certificate);
    const std::string& key = options.private_key.empty() ? options.certificate : options.private_key;
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
      return bad("cannot load the private key " + key);
    if (SSL_CTX_check_private_key(ctx) != 1) return bad("the private key does not match the certificate");
  }

  if (role == TlsRole::client) {
    if (!options.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) != 1)
        return bad("cannot load the CA certificates " + options.ca_file);
    } else {
      SSL_CTX_set_default_verify_paths(ctx);
    }
    SSL_CTX_set_verify(ctx, options.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  } else if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) != 1)
      return bad("cannot load the client CA certificates " + options.ca_file);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }

  if (!options.psk_file.empty()) {
    if (Status loaded = self->load_psk_file(); !loaded) return tl::unexpected(loaded.error());
    if (role == TlsRole::client)
      SSL_CTX_set_psk_client_callback(ctx, psk_client_callback);
    else
      SSL_CTX_set_psk_server_callback(ctx, psk_server_callback);
  }
  if (role == TlsRole::server && options.certificate.empty() && options.psk_file.empty())
    return fail(std::errc::invalid_argument, "a TLS server needs a certificate and key, or a PSK file");
  return self;
}

TlsContext::TlsContext(TlsRole role, TlsOptions options, SSL_CTX* ctx)
    : role_(role), options_(std::move(options)), ctx_(ctx) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

const std::vector<unsigned char>* TlsContext::psk_key(const std::string& identity) const {
  auto it = psk_keys_.find(identity);
  return it == psk_keys_.end() ? nullptr : &it->second;
}

Status TlsContext::load_psk_file() {
  std::ifstream in(options_.psk_file);
  if (!in) return fail(std::errc::no_such_file_or_directory, "cannot read the PSK file " + options_.psk_file);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto colon = line.find(':');
    std::string where = options_.psk_file + " line " + std::to_string(number);
    if (colon == std::string::npos || colon == 0) return fail(std::errc::invalid_argument, where + ": expected identity:hexkey");
    std::string hex = line.substr(colon + 1);
    if (hex.empty() || hex.size() % 2 != 0) return fail(std::errc::invalid_argument, where + ": the key is not an even number of hex digits");
    std::vector<unsigned char> key;
    if (!decode_hex(hex, key)) return fail(std::errc::invalid_argument, where + ": the key is not hexadecimal");
    std::string identity = line.substr(0, colon);
    if (psk_identity_.empty()) psk_identity_ = identity;
    psk_keys_[identity] = std::move(key);
  }
  if (psk_keys_.empty()) return fail(std::errc::invalid_argument, options_.psk_file + ": no keys");
  if (!options_.psk_identity.empty()) {
    if (!psk_keys_.count(options_.psk_identity))
      return fail(std::errc::invalid_argument, options_.psk_file + ": no key for identity '" + options_.psk_identity + "'");
    psk_identity_ = options_.psk_identity;
  }
  return Status{};
}

}  // namespace sluice
