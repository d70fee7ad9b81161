#include "protocols/common/tls_sniff.hpp"

#include <openssl/ssl.h>

#include <cstring>
#include <doctest/doctest.h>
#include <memory>
#include <vector>

using namespace sluice;

namespace {

// The first flight of a real OpenSSL client: what a TLS sender puts on the wire.
std::vector<std::byte> client_hello(int max_version) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  REQUIRE(ctx);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  REQUIRE(ssl);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out);  // the SSL owns both
  SSL_set_connect_state(ssl.get());
  CHECK(SSL_do_handshake(ssl.get()) != 1);  // waits for the server's reply
  char* data = nullptr;
  const long size = BIO_get_mem_data(out, &data);
  REQUIRE(size > 9);
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  std::memcpy(bytes.data(), data, bytes.size());
  return bytes;
}

std::vector<std::byte> bytes_of(std::initializer_list<unsigned> values) {
  std::vector<std::byte> bytes;
  for (unsigned v : values) bytes.push_back(static_cast<std::byte>(v));
  return bytes;
}

}  // namespace

TEST_CASE("tls_sniff: OpenSSL's ClientHello is recognised, TLS 1.3 and 1.2") {
  CHECK(starts_with_tls_client_hello(client_hello(TLS1_3_VERSION)));
  CHECK(starts_with_tls_client_hello(client_hello(TLS1_2_VERSION)));
  // The first 9 bytes are enough, as a Chunked header (12 bytes) holds them.
  auto hello = client_hello(TLS1_3_VERSION);
  CHECK(starts_with_tls_client_hello(std::span(hello).first(9)));
  CHECK_FALSE(starts_with_tls_client_hello(std::span(hello).first(8)));
}

TEST_CASE("tls_sniff: image bytes and protocol headers are not mistaken for TLS") {
  CHECK_FALSE(starts_with_tls_client_hello(std::vector<std::byte>(512)));  // zeros
  // GRUB's MBR, an NTFS boot sector, a qcow2 and a VHD footer start.
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({0xeb, 0x63, 0x90, 0x10, 0x8e, 0xd0, 0xbc, 0x00, 0xb0})));
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({0xeb, 0x52, 0x90, 'N', 'T', 'F', 'S', ' ', ' '})));
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({'Q', 'F', 'I', 0xfb, 0, 0, 0, 3, 0})));
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({'c', 'o', 'n', 'e', 'c', 't', 'i', 'x', 0})));
  // A Chunked header: offset 0x16 (not sector aligned, but bytes on the wire).
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({0x16, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0})));
  // "PUT /" and an NBD reply magic.
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({'P', 'U', 'T', ' ', '/', 'i', 'm', 'p', 'o'})));
  CHECK_FALSE(starts_with_tls_client_hello(bytes_of({0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0, 0})));
}

TEST_CASE("tls_sniff: each header field is checked") {
  const auto good = bytes_of({0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc});  // 256-byte record
  CHECK(starts_with_tls_client_hello(good));
  auto alert = good;
  alert[0] = std::byte{0x15};
  CHECK_FALSE(starts_with_tls_client_hello(alert));
  auto version = good;
  version[2] = std::byte{0x05};
  CHECK_FALSE(starts_with_tls_client_hello(version));
  auto server_hello = good;
  server_hello[5] = std::byte{0x02};
  CHECK_FALSE(starts_with_tls_client_hello(server_hello));
  auto huge = good;
  huge[3] = std::byte{0x41};  // a record over 2^14 bytes
  CHECK_FALSE(starts_with_tls_client_hello(huge));
  auto short_hello = good;
  short_hello[8] = std::byte{0x10};  // the hello ends before its record does
  CHECK_FALSE(starts_with_tls_client_hello(short_hello));
  auto continued = good;
  continued[7] = std::byte{0x02};  // longer than the record: it goes on in the next
  CHECK(starts_with_tls_client_hello(continued));
}
