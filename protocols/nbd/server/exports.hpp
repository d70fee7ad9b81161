// What an NBD server offers: its exports (only these; an export name is never
// interpreted as a path) and the policy every connection follows.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/image.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"

namespace sluice::nbd {

struct ServerExport {
  std::string name;
  std::string description;
  std::shared_ptr<Image> image;  // shared by every connection to the export
};

struct ServerConfig {
  std::vector<ServerExport> exports;

  // TLS: null means the server never offers it (STARTTLS is refused). With a context,
  // `tls_required` makes every option but STARTTLS and ABORT wait for it (the spec's
  // FORCEDTLS mode); without, TLS is the client's choice.
  std::shared_ptr<TlsContext> tls;
  bool tls_required = false;
  StreamOptions stream;  // for the stream that replaces the plain one after STARTTLS

  // A client that has not reached the transmission phase by then is dropped.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
  // After a server shutdown began, how long a busy client gets to take the hint
  // (ESHUTDOWN replies) and disconnect before the server closes the connection.
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(2)};

  // Per connection: how many requests and how many payload bytes may be in flight. A
  // client that sends more waits (the server stops reading its socket).
  std::size_t max_requests_in_flight = 64;
  std::size_t max_bytes_in_flight = 64u << 20;
  // On plain sockets READ data goes file -> pipe -> socket and WRITE payloads socket ->
  // pipe -> file, where the image is a buffered file (serve --no-zero-copy: both
  // through memory).
  bool zero_copy = true;
  // Pipes per connection for those (a READ holds one while it is sent, a WRITE from
  // receiving its payload until the image has it).
  std::size_t pipes = 16;
};

// The export a client's name selects. The empty name is the spec's "default export":
// an export configured with that name, else the first one.
const ServerExport* find_export(const ServerConfig& config, std::string_view name);

// The transmission flags for `image`: exactly the commands and flags that work.
std::uint16_t transmission_flags(const ImageTraits& image, bool structured_replies);

}  // namespace sluice::nbd
