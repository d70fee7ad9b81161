#include "protocols/common/tls_sniff.hpp"

#include <cstdint>

namespace sluice {

namespace {
constexpr unsigned record_type_handshake = 0x16;
constexpr unsigned handshake_client_hello = 0x01;
// A record's plaintext is at most 2^14 bytes; a ClientHello's record is plaintext.
constexpr std::uint32_t max_record = 1u << 14;

unsigned at(std::span<const std::byte> bytes, std::size_t i) { return std::to_integer<unsigned>(bytes[i]); }
}  // namespace

bool starts_with_tls_client_hello(std::span<const std::byte> bytes) {
  if (bytes.size() < 9) return false;
  if (at(bytes, 0) != record_type_handshake || at(bytes, 1) != 3 || at(bytes, 2) > 4) return false;
  const std::uint32_t record = at(bytes, 3) << 8 | at(bytes, 4);
  if (record < 4 || record > max_record || at(bytes, 5) != handshake_client_hello) return false;
  // The hello fills its record, or continues in the next one.
  const std::uint32_t hello = at(bytes, 6) << 16 | at(bytes, 7) << 8 | at(bytes, 8);
  return hello + 4 >= record;
}

std::string tls_on_plaintext_listener(const std::string& scheme_hint) {
  return "the sender speaks TLS (it sent a TLS ClientHello), but this listener is plaintext: listen on tls:// "
         "with a certificate, or send to " + scheme_hint;
}

}  // namespace sluice
