// The receiver's side of the import handshake (`sluice serve --http`): reads the
// client's request head, byte-exact up to the blank line, since the Chunked body
// follows on the same connection with no framing of its own.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/error.hpp"
#include "protocols/http/headers.hpp"
#include "protocols/http/message_head.hpp"

namespace sluice {

struct HttpRequestHead {
  std::string method;  // case-sensitive, as RFC 9110 says: "put" is not PUT
  std::string target;  // as received: /import_raw_vdi?vdi=...
  std::string version;  // "HTTP/1.1"
  HttpHeaders headers;

  std::string_view path() const;   // the target before any '?'
  std::string_view query() const;  // after the '?', or empty
};

Result<HttpRequestHead> parse_http_request_head(std::string_view head);

class HttpRequestParser {
 public:
  HttpRequestParser() : reader_("HTTP request from the client") {}

  // Feeds the next bytes read from the connection; returns how many belong to the
  // request head. Once done(), any bytes past that count are the body's. Fails, and
  // keeps failing, on a malformed or oversized head or on bytes that cannot start an
  // HTTP request (a client sending Chunked without the handshake).
  Result<std::size_t> feed(std::span<const std::byte> bytes);
  Result<std::size_t> feed(std::string_view bytes);

  bool done() const { return request_.has_value(); }
  // Valid once done().
  const HttpRequestHead& request() const { return *request_; }

  // For the end of the stream: fine once done(), otherwise the error to report.
  Status at_end_of_stream() const;

 private:
  Result<std::size_t> record(tl::unexpected<Error> error);

  HttpHeadReader reader_;
  std::optional<HttpRequestHead> request_;
  std::optional<Error> failure_;
};

}  // namespace sluice
