// The sender's side of the import handshake: reads the server's answer to the PUT,
// byte-exact up to the blank line, because whatever follows (an NBD handshake when
// the server says `Transfer-Encoding: nbd`) belongs to the next protocol. Only a 2xx
// lets the transfer go on; redirects are not followed, as vhd-tool does not.
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

struct HttpResponseHead {
  std::string status_line;  // as received, for messages
  std::string version;      // "HTTP/1.1"
  int status = 0;
  std::string reason;
  HttpHeaders headers;
  // `Transfer-Encoding: nbd` (any case): the connection now carries NBD, not Chunked.
  bool transfer_encoding_nbd = false;
};

// Parses a status line and header block; any status is accepted here.
Result<HttpResponseHead> parse_http_response_head(std::string_view head);

class HttpResponseParser {
 public:
  HttpResponseParser() : reader_("HTTP response from the server") {}

  // Feeds the next bytes read from the connection; returns how many belong to the
  // response head. Once done(), any bytes past that count are the next protocol's.
  // Interim 1xx answers are skipped. Fails, and keeps failing, on a malformed or
  // oversized head, on bytes that cannot start an HTTP response, and on a final status
  // other than 2xx, naming the status line: "the server answered 'HTTP/1.1 404 Not
  // Found'".
  Result<std::size_t> feed(std::span<const std::byte> bytes);
  Result<std::size_t> feed(std::string_view bytes);

  // A 2xx head was read completely.
  bool done() const { return response_.has_value(); }
  // Valid once done().
  const HttpResponseHead& response() const { return *response_; }

  // For the end of the stream: fine once done(), otherwise the error to report.
  Status at_end_of_stream() const;

 private:
  Result<std::size_t> record(tl::unexpected<Error> error);

  HttpHeadReader reader_;
  std::optional<HttpResponseHead> response_;
  std::optional<Error> failure_;
};

}  // namespace sluice
