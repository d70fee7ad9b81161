#include "protocols/http/request_parser.hpp"

#include <algorithm>
#include <span>

#include "protocols/common/tls_sniff.hpp"

namespace sluice {

namespace {

constexpr std::string_view what = "HTTP request from the client";
// Longer than any registered method; past it the client is not speaking HTTP.
constexpr std::size_t max_method_size = 32;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_http_version(std::string_view text) {
  return text.size() == 8 && text.substr(0, 5) == "HTTP/" && is_digit(text[5]) && text[6] == '.' &&
         is_digit(text[7]);
}

bool is_target_char(char c) { return c > 0x20 && c < 0x7f; }

// A method is a short token followed by a space; binary bytes (a Chunked header sent
// without the handshake) fail at once instead of after 64 KiB.
bool cannot_start_request(std::string_view buffered) {
  const std::size_t space = buffered.find(' ');
  const std::string_view method = buffered.substr(0, space);
  if (!std::all_of(method.begin(), method.end(), is_http_token_char)) return true;
  return space == 0 || method.size() > max_method_size;
}

}  // namespace

std::string_view HttpRequestHead::path() const {
  return std::string_view(target).substr(0, target.find('?'));
}

std::string_view HttpRequestHead::query() const {
  const std::size_t mark = target.find('?');
  return mark == std::string::npos ? std::string_view{} : std::string_view(target).substr(mark + 1);
}

Result<HttpRequestHead> parse_http_request_head(std::string_view head) {
  auto lines = split_http_head(head, what);
  if (!lines) return tl::unexpected(lines.error());
  const std::string_view line = lines->start_line;
  auto bad_request_line = [&] {
    return fail(std::errc::protocol_error,
                "malformed " + std::string(what) + ": bad request line '" + quote_for_message(line) + "'");
  };
  // method SP request-target SP HTTP-version, single spaces only.
  const std::size_t first_space = line.find(' ');
  const std::size_t last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) return bad_request_line();
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = line.substr(last_space + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_http_token_char)) return bad_request_line();
  if (target.empty() || !std::all_of(target.begin(), target.end(), is_target_char)) return bad_request_line();
  if (!is_http_version(version)) return bad_request_line();

  HttpRequestHead request;
  request.method = std::string(method);
  request.target = std::string(target);
  request.version = std::string(version);
  request.headers = std::move(lines->headers);
  return request;
}

Result<std::size_t> HttpRequestParser::record(tl::unexpected<Error> error) {
  failure_ = error.value();
  return error;
}

Result<std::size_t> HttpRequestParser::feed(std::span<const std::byte> bytes) {
  return feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Result<std::size_t> HttpRequestParser::feed(std::string_view bytes) {
  if (failure_) return tl::unexpected(*failure_);
  if (done()) return 0;
  auto taken = reader_.feed(bytes);
  if (cannot_start_request(reader_.buffered())) {
    if (starts_with_tls_client_hello(std::as_bytes(std::span(reader_.buffered()))))
      return record(fail(std::errc::protocol_error, tls_on_plaintext_listener("http://")));
    return record(fail(std::errc::protocol_error, "the client did not send an HTTP request: it sent '" +
                                                      quote_for_message(reader_.buffered(), 16) + "'"));
  }
  if (!taken) return record(tl::unexpected(taken.error()));
  if (!reader_.complete()) return taken;

  auto head = parse_http_request_head(reader_.buffered());
  if (!head) return record(tl::unexpected(head.error()));
  request_ = std::move(*head);
  return taken;
}

Status HttpRequestParser::at_end_of_stream() const {
  if (failure_) return tl::unexpected(*failure_);
  if (done()) return {};
  return fail(std::errc::connection_reset,
              "the client closed the connection after " + std::to_string(reader_.buffered().size()) +
                  " bytes, before the end of its HTTP request headers");
}

}  // namespace sluice
