// TlsRecordSealer: a TLS 1.3 client's outgoing records, written by Sluice itself once
// OpenSSL has finished the handshake.
//
// SSL_write copies the plaintext into OpenSSL's record buffer, encrypts it there, and
// hands the record to the BIO, which copies it into the batch to be sent: two passes
// over every byte besides the cipher's own (docs/benchmarks.md, section "TLS record
// sealing"). Sealing reads the caller's bytes once, as
// the AEAD's input, and writes the ciphertext straight into the batch.
//
// The keys come from the client's first application traffic secret (RFC 8446 7.1,
// 7.3); OpenSSL hands it over through its key-log callback (TlsContext). Once a sealer
// writes, OpenSSL's own writes on that connection are dropped (TlsStream): its record
// sequence is stale, and a record it sealed would reuse a nonce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "engine/error.hpp"
#include "engine/uninitialized_allocator.hpp"

namespace sluice {

using CiphertextBytes = std::vector<std::byte, UninitializedAllocator<std::byte>>;

class TlsRecordSealer {
 public:
  // TLS 1.3 content types (RFC 8446 5.1).
  enum class ContentType : std::uint8_t { alert = 21, handshake = 22, application_data = 23 };

  // A sealer for `suite` (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 or
  // TLS_CHACHA20_POLY1305_SHA256) from the client's application traffic secret;
  // nullptr for any other suite, or a secret of the wrong length. Each key seals at
  // most `records_per_key` records before a KeyUpdate replaces it.
  static std::unique_ptr<TlsRecordSealer> create(const SSL_CIPHER* suite, std::span<const unsigned char> secret,
                                                 std::uint64_t records_per_key);
  ~TlsRecordSealer();
  TlsRecordSealer(const TlsRecordSealer&) = delete;
  TlsRecordSealer& operator=(const TlsRecordSealer&) = delete;

  // Appends `plaintext` to `out` as records of `type` (at most 16 KiB of plaintext
  // each), calling `record` with each record's size on the wire. A KeyUpdate goes first
  // when the peer asked for one or the key is used up.
  Status seal(ContentType type, std::span<const std::byte> plaintext, CiphertextBytes& out,
              const std::function<void(std::size_t)>& record);

  // The peer sent KeyUpdate with update_requested: ours goes before the next record.
  void peer_requested_update() { update_due_ = true; }

  std::uint64_t key_updates() const { return key_updates_; }

 private:
  TlsRecordSealer(const EVP_CIPHER* cipher, const char* digest, std::size_t key_length,
                  std::vector<unsigned char> secret, std::uint64_t records_per_key);
  Status derive_keys();
  Status seal_record(ContentType type, std::span<const std::byte> plaintext, CiphertextBytes& out,
                     const std::function<void(std::size_t)>& record);
  Status update_key(CiphertextBytes& out, const std::function<void(std::size_t)>& record);

  const EVP_CIPHER* cipher_;
  const char* digest_;
  std::size_t key_length_;
  std::vector<unsigned char> secret_;
  std::vector<unsigned char> iv_;
  EVP_CIPHER_CTX* context_ = nullptr;
  std::uint64_t sequence_ = 0;
  std::uint64_t records_per_key_;
  std::uint64_t key_updates_ = 0;
  bool update_due_ = false;
};

}  // namespace sluice
