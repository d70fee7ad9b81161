#include "protocols/http/response_parser.hpp"

#include <algorithm>

namespace sluice {

namespace {

constexpr std::string_view http_prefix = "HTTP/";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_http_version(std::string_view text) {
  return text.size() == 8 && text.substr(0, 5) == http_prefix && is_digit(text[5]) && text[6] == '.' &&
         is_digit(text[7]);
}

bool is_reason_char(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return c == '\t' || (byte >= 0x20 && byte != 0x7f);
}

// Connecting to an NBD server or a TLS port by mistake yields bytes that can never
// become a status line; fail on them now instead of waiting for 64 KiB that never come.
bool cannot_start_response(std::string_view buffered) {
  const std::size_t n = std::min(buffered.size(), http_prefix.size());
  return buffered.substr(0, n) != http_prefix.substr(0, n);
}

}  // namespace

Result<HttpResponseHead> parse_http_response_head(std::string_view head) {
  constexpr std::string_view what = "HTTP response from the server";
  auto lines = split_http_head(head, what);
  if (!lines) return tl::unexpected(lines.error());
  const std::string_view line = lines->start_line;
  auto bad_status_line = [&] {
    return fail(std::errc::protocol_error,
                "malformed " + std::string(what) + ": bad status line '" + quote_for_message(line) + "'");
  };
  // HTTP-version SP 3DIGIT SP reason-phrase; the reason may be empty, and some
  // servers drop the space before an empty one.
  if (line.size() < 12 || !is_http_version(line.substr(0, 8)) || line[8] != ' ') return bad_status_line();
  const std::string_view code = line.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), is_digit) || code[0] < '1' || code[0] > '5') return bad_status_line();
  if (line.size() > 12 && line[12] != ' ') return bad_status_line();
  const std::string_view reason = line.size() > 12 ? line.substr(13) : std::string_view{};
  if (!std::all_of(reason.begin(), reason.end(), is_reason_char)) return bad_status_line();

  HttpResponseHead response;
  response.status_line = std::string(line);
  response.version = std::string(line.substr(0, 8));
  response.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  response.reason = std::string(reason);
  response.headers = std::move(lines->headers);
  for (const HttpHeader& field : response.headers.all())
    if (equals_ignoring_case(field.name, "Transfer-Encoding") && equals_ignoring_case(field.value, "nbd"))
      response.transfer_encoding_nbd = true;
  return response;
}

Result<std::size_t> HttpResponseParser::record(tl::unexpected<Error> error) {
  failure_ = error.value();
  return error;
}

Result<std::size_t> HttpResponseParser::feed(std::span<const std::byte> bytes) {
  return feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Result<std::size_t> HttpResponseParser::feed(std::string_view bytes) {
  if (failure_) return tl::unexpected(*failure_);
  if (done()) return 0;
  auto taken = reader_.feed(bytes);
  if (cannot_start_response(reader_.buffered()))
    return record(fail(std::errc::protocol_error, "the server did not answer with HTTP: it sent '" +
                                                      quote_for_message(reader_.buffered(), 16) + "'"));
  if (!taken) return record(tl::unexpected(taken.error()));
  if (!reader_.complete()) return taken;

  auto head = parse_http_response_head(reader_.buffered());
  if (!head) return record(tl::unexpected(head.error()));
  if (head->status >= 100 && head->status <= 199 && head->status != 101) {
    // An interim answer (100 Continue, 102 Processing, 103 Early Hints): the final
    // one follows (RFC 9110 15.2). 101 would switch protocols, which was not asked for.
    reader_ = HttpHeadReader(reader_.what());
    auto more = feed(bytes.substr(*taken));
    if (!more) return more;
    return *taken + *more;
  }
  if (head->status < 200 || head->status > 299) {
    std::string message = "the server answered '" + quote_for_message(head->status_line, 200) + "'";
    if (head->status >= 300 && head->status <= 399) {
      auto location = head->headers.find("Location");
      message += location ? " (a redirect to '" + quote_for_message(*location, 200) + "', which is not followed)"
                          : " (a redirect, which is not followed)";
    }
    return record(fail(std::errc::protocol_error, std::move(message)));
  }
  response_ = std::move(*head);
  return taken;
}

Status HttpResponseParser::at_end_of_stream() const {
  if (failure_) return tl::unexpected(*failure_);
  if (done()) return {};
  return fail(std::errc::connection_reset,
              "the server closed the connection after " + std::to_string(reader_.buffered().size()) +
                  " bytes, before the end of its HTTP response headers");
}

}  // namespace sluice
