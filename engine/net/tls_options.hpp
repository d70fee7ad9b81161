// How a TLS endpoint authenticates itself and its peer.
#pragma once

#include <cstdint>
#include <string>

namespace sluice {

struct TlsOptions {
  // Certificates (X.509). A client verifies the server against `ca_file` (or the system
  // store when empty); a server given `ca_file` requires and verifies client certificates.
  std::string ca_file;
  std::string certificate;  // PEM; the server's, or the client's own (optional)
  std::string private_key;
  bool verify_peer = true;  // client side: certificate and host name
  std::string hostname;     // SNI and the name to verify; empty: no SNI, no name check

  // Pre-shared keys instead of certificates: a file of "identity:hexkey" lines
  // (nbdkit's --tls-psk format). A client uses `psk_identity` (or the first line).
  std::string psk_file;
  std::string psk_identity;

  // OpenSSL syntax; empty: default_tls12_ciphers and default_tls13_ciphersuites
  // (tls_context.hpp): OpenSSL's own, with AES-128-GCM moved first.
  std::string ciphers;       // TLS 1.2 cipher list
  std::string ciphersuites;  // TLS 1.3 suites
  bool tls12_only = false;   // what xen-api's stunnel speaks

  // A TLS 1.3 client seals its own application records after the handshake, one pass
  // over the bytes instead of OpenSSL's three (tls_record_sealer.hpp); false leaves
  // every record to OpenSSL, for comparisons.
  bool own_records = true;
  // Records under one traffic key before the sealer moves to the next with a
  // KeyUpdate: RFC 8446 5.5 allows AES-GCM 2^24.5 full records (about 370 GiB) per key.
  std::uint64_t records_per_key = std::uint64_t{1} << 24;

  bool enabled() const { return !certificate.empty() || !ca_file.empty() || !psk_file.empty(); }
  // Compared with TlsOptions{}: whether anything was asked of TLS at all.
  bool operator==(const TlsOptions&) const = default;
};

}  // namespace sluice
