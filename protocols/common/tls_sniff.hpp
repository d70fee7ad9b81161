// A plaintext receiver that a TLS client connects to reads a TLS ClientHello where its
// protocol's first bytes belong. Recognising one turns "chunk at offset
// 72058831005352726: offset is not a multiple of 512" into a message that names the
// mistake, and keeps a raw receiver from writing the hello into the disk.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace sluice {

// True when `bytes` begin with the record and handshake headers of a TLS ClientHello
// (any version from SSL 3.0 to TLS 1.3). Needs the first 9 bytes; fewer are never a
// match. A raw image matches by chance with odds of about one in 2^40.
bool starts_with_tls_client_hello(std::span<const std::byte> bytes);

// "the sender speaks TLS, but this listener is plaintext: ...", for the receiver's log.
std::string tls_on_plaintext_listener(const std::string& scheme_hint);

}  // namespace sluice
