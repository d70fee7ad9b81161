#include "engine/net/tls_record_sealer.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "engine/net/tls_context.hpp"

namespace sluice {

namespace {

constexpr std::size_t max_plaintext = 16384;  // RFC 8446 5.1: 2^14 bytes per record
constexpr std::size_t tag_length = 16;
constexpr std::size_t nonce_length = 12;
constexpr std::size_t header_length = 5;

// HKDF-Expand-Label with an empty context (RFC 8446 7.1).
bool expand_label(const char* digest, std::span<const unsigned char> secret, std::string_view label,
                  std::span<unsigned char> out) {
  std::vector<unsigned char> info;
  info.push_back(static_cast<unsigned char>(out.size() >> 8));
  info.push_back(static_cast<unsigned char>(out.size() & 0xff));
  const std::string full = "tls13 " + std::string(label);
  info.push_back(static_cast<unsigned char>(full.size()));
  info.insert(info.end(), full.begin(), full.end());
  info.push_back(0);
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return false;
  EVP_KDF_CTX* context = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (context == nullptr) return false;
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  std::array<OSSL_PARAM, 5> params{
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<unsigned char*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end(),
  };
  const bool ok = EVP_KDF_derive(context, out.data(), out.size(), params.data()) == 1;
  EVP_KDF_CTX_free(context);
  return ok;
}

Status crypto_failure(const std::string& what) {
  return fail(std::errc::io_error, "TLS record sealing failed (" + what + "): " + openssl_errors());
}

}  // namespace

std::unique_ptr<TlsRecordSealer> TlsRecordSealer::create(const SSL_CIPHER* suite, std::span<const unsigned char> secret,
                                                         std::uint64_t records_per_key) {
  struct Suite {
    std::string_view name;
    const EVP_CIPHER* (*cipher)();
    const char* digest;
    std::size_t key_length;
    std::size_t hash_length;  // of the traffic secret
  };
  static constexpr std::array<Suite, 3> suites{{
      {"TLS_AES_128_GCM_SHA256", &EVP_aes_128_gcm, "SHA256", 16, 32},
      {"TLS_AES_256_GCM_SHA384", &EVP_aes_256_gcm, "SHA384", 32, 48},
      {"TLS_CHACHA20_POLY1305_SHA256", &EVP_chacha20_poly1305, "SHA256", 32, 32},
  }};
  if (suite == nullptr || records_per_key == 0) return nullptr;
  const std::string_view name = SSL_CIPHER_standard_name(suite);
  const auto* known = std::find_if(suites.begin(), suites.end(), [&](const Suite& s) { return s.name == name; });
  if (known == suites.end() || secret.size() != known->hash_length) return nullptr;
  std::unique_ptr<TlsRecordSealer> sealer(
      new TlsRecordSealer(known->cipher(), known->digest, known->key_length,
                          std::vector<unsigned char>(secret.begin(), secret.end()), records_per_key));
  if (!sealer->context_ || !sealer->derive_keys()) return nullptr;
  return sealer;
}

TlsRecordSealer::TlsRecordSealer(const EVP_CIPHER* cipher, const char* digest, std::size_t key_length,
                                 std::vector<unsigned char> secret, std::uint64_t records_per_key)
    : cipher_(cipher),
      digest_(digest),
      key_length_(key_length),
      secret_(std::move(secret)),
      iv_(nonce_length),
      context_(EVP_CIPHER_CTX_new()),
      records_per_key_(records_per_key) {}

TlsRecordSealer::~TlsRecordSealer() {
  EVP_CIPHER_CTX_free(context_);
  OPENSSL_cleanse(secret_.data(), secret_.size());
  OPENSSL_cleanse(iv_.data(), iv_.size());
}

Status TlsRecordSealer::derive_keys() {
  std::vector<unsigned char> key(key_length_);
  bool ok = expand_label(digest_, secret_, "key", key) && expand_label(digest_, secret_, "iv", iv_) &&
            EVP_EncryptInit_ex(context_, cipher_, nullptr, key.data(), nullptr) == 1;
  OPENSSL_cleanse(key.data(), key.size());
  if (!ok) return crypto_failure("deriving the traffic keys");
  sequence_ = 0;
  return Status{};
}

Status TlsRecordSealer::seal(ContentType type, std::span<const std::byte> plaintext, CiphertextBytes& out,
                             const std::function<void(std::size_t)>& record) {
  do {
    if (update_due_ || sequence_ >= records_per_key_) {
      if (Status s = update_key(out, record); !s) return s;
    }
    const std::size_t n = std::min(plaintext.size(), max_plaintext);
    if (Status s = seal_record(type, plaintext.first(n), out, record); !s) return s;
    plaintext = plaintext.subspan(n);
  } while (!plaintext.empty());
  return Status{};
}

Status TlsRecordSealer::update_key(CiphertextBytes& out, const std::function<void(std::size_t)>& record) {
  // KeyUpdate, update_not_requested (RFC 8446 4.6.3), under the key it retires.
  constexpr std::array<std::byte, 5> key_update{std::byte{24}, std::byte{0}, std::byte{0}, std::byte{1},
                                                std::byte{0}};
  if (Status s = seal_record(ContentType::handshake, key_update, out, record); !s) return s;
  std::vector<unsigned char> next(secret_.size());
  if (!expand_label(digest_, secret_, "traffic upd", next)) return crypto_failure("updating the traffic secret");
  OPENSSL_cleanse(secret_.data(), secret_.size());
  secret_ = std::move(next);
  if (Status s = derive_keys(); !s) return s;
  update_due_ = false;
  ++key_updates_;
  return Status{};
}

Status TlsRecordSealer::seal_record(ContentType type, std::span<const std::byte> plaintext, CiphertextBytes& out,
                                    const std::function<void(std::size_t)>& record) {
  // TLSCiphertext: opaque type application_data, legacy version 0x0303, the length of
  // the encrypted TLSInnerPlaintext (the content, then its real type, no padding) and
  // the tag. The header is the AEAD's additional data; the nonce is the IV with the
  // record's sequence number XORed into its last 8 bytes.
  const std::size_t inner = plaintext.size() + 1;
  const std::size_t length = inner + tag_length;
  const std::size_t at = out.size();
  out.resize(at + header_length + length);
  auto* header = reinterpret_cast<unsigned char*>(out.data() + at);
  header[0] = static_cast<unsigned char>(ContentType::application_data);
  header[1] = 0x03;
  header[2] = 0x03;
  header[3] = static_cast<unsigned char>(length >> 8);
  header[4] = static_cast<unsigned char>(length & 0xff);
  std::array<unsigned char, nonce_length> nonce{};
  std::copy(iv_.begin(), iv_.end(), nonce.begin());
  for (int i = 0; i < 8; ++i)
    nonce[nonce_length - 1 - static_cast<std::size_t>(i)] ^= static_cast<unsigned char>(sequence_ >> (8 * i));
  unsigned char* sealed = header + header_length;
  const auto real_type = static_cast<unsigned char>(type);
  int n = 0;
  bool ok = EVP_EncryptInit_ex(context_, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
            EVP_EncryptUpdate(context_, nullptr, &n, header, static_cast<int>(header_length)) == 1 &&
            EVP_EncryptUpdate(context_, sealed, &n, reinterpret_cast<const unsigned char*>(plaintext.data()),
                              static_cast<int>(plaintext.size())) == 1 &&
            static_cast<std::size_t>(n) == plaintext.size() &&
            EVP_EncryptUpdate(context_, sealed + plaintext.size(), &n, &real_type, 1) == 1 && n == 1 &&
            EVP_EncryptFinal_ex(context_, sealed + inner, &n) == 1 && n == 0 &&
            EVP_CIPHER_CTX_ctrl(context_, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag_length), sealed + inner) == 1;
  if (!ok) {
    out.resize(at);
    return crypto_failure("encrypting a record");
  }
  ++sequence_;
  if (record) record(header_length + length);
  return Status{};
}

}  // namespace sluice
