// The head of an HTTP/1.x message (start line, header fields, blank line), read
// incrementally from a stream that carries something else right after it: the
// Chunked body or an NBD handshake follows on the same connection, so the reader
// takes bytes only up to the blank line and says how many it took.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/error.hpp"
#include "protocols/http/headers.hpp"

namespace sluice {

// Neither xapi nor vhd-tool sends more than a few hundred bytes; a peer that sends
// more than this is not speaking the import handshake.
constexpr std::size_t max_http_head_size = 64 * 1024;

class HttpHeadReader {
 public:
  // `what` names the message in errors: "HTTP response from the server".
  explicit HttpHeadReader(std::string what) : what_(std::move(what)) {}

  // Takes bytes up to and including the blank line that ends the head; returns how
  // many of `bytes` it took (all of them until the head is complete, none after).
  Result<std::size_t> feed(std::string_view bytes);
  bool complete() const { return complete_; }
  // Everything taken so far but leading empty lines: the whole head, its ending empty
  // line included, once complete().
  std::string_view buffered() const { return head_; }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::string head_;
  std::size_t leading_ = 0;  // empty-line bytes skipped before the start line
  bool complete_ = false;
};

struct HttpHeadLines {
  std::string_view start_line;  // a view into the head passed to split_http_head
  HttpHeaders headers;
};

// Splits a complete head into its start line and header fields. Lines end in CRLF or
// a bare LF (RFC 9112 2.2 lets a recipient take either, and cohttp, which vhd-tool
// and xapi use, does); otherwise strict, since anything lenient here is a
// request-smuggling surface: no bare CR, field names are tokens with no space before
// the colon, no line folding, no control bytes.
Result<HttpHeadLines> split_http_head(std::string_view head, std::string_view what);

// RFC 9110 token characters (methods, field names).
bool is_http_token_char(char c);

// `text` made safe to quote in an error message: control and non-ASCII bytes as
// \xNN, cut after `max` bytes.
std::string quote_for_message(std::string_view text, std::size_t max = 80);

}  // namespace sluice
