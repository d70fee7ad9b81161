#include "protocols/http/message_head.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {

namespace {

tl::unexpected<Error> malformed(std::string_view what, const std::string& why) {
  return fail(std::errc::protocol_error, "malformed " + std::string(what) + ": " + why);
}

bool is_field_value_char(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return c == '\t' || (byte >= 0x20 && byte != 0x7f);  // obs-text (>= 0x80) is allowed
}

std::string_view trim_whitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

bool is_http_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string quote_for_message(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += text[i];
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

Result<std::size_t> HttpHeadReader::feed(std::string_view bytes) {
  if (complete_) return 0;
  // Empty lines before the start line are ignored (RFC 9112 2.2: a client may end a
  // previous body with an extra CRLF). They count towards the size limit.
  std::size_t skipped = 0;
  while (head_.empty() && skipped < bytes.size() && (bytes[skipped] == '\r' || bytes[skipped] == '\n') &&
         leading_ < max_http_head_size) {
    ++skipped;
    ++leading_;
  }
  bytes.remove_prefix(skipped);
  const std::size_t before = head_.size();
  const std::size_t take = std::min(bytes.size(), max_http_head_size - std::min(max_http_head_size, before + leading_));
  head_.append(bytes.substr(0, take));
  // The head ends at an empty line: LF LF or LF CR LF, which may straddle the
  // previous feed (one-byte feeds are legal).
  for (std::size_t lf = head_.find('\n', before >= 2 ? before - 2 : 0); lf != std::string::npos;
       lf = head_.find('\n', lf + 1)) {
    if (lf >= 1 && (head_[lf - 1] == '\n' || (lf >= 2 && head_[lf - 1] == '\r' && head_[lf - 2] == '\n'))) {
      head_.resize(lf + 1);
      complete_ = true;
      return skipped + head_.size() - before;
    }
  }
  if (head_.size() + leading_ >= max_http_head_size)
    return fail(std::errc::message_size, "the " + what_ + " has headers over " +
                                             std::to_string(max_http_head_size / 1024) + " KiB without ending");
  return skipped + take;
}

Result<HttpHeadLines> split_http_head(std::string_view head, std::string_view what) {
  HttpHeadLines lines;
  bool first = true;
  for (std::string_view rest = head;;) {
    const std::size_t eol = rest.find('\n');
    if (eol == std::string_view::npos) return malformed(what, "the head does not end with an empty line");
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos)
      return malformed(what, "bare CR in line '" + quote_for_message(line) + "'");
    if (first) {
      if (line.empty()) return malformed(what, "empty start line");
      lines.start_line = line;
      first = false;
      continue;
    }
    if (line.empty()) {
      if (!rest.empty()) return malformed(what, "bytes after the empty line that ends the head");
      return lines;
    }
    if (line.front() == ' ' || line.front() == '\t')
      return malformed(what, "folded header line '" + quote_for_message(line) + "'");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return malformed(what, "header line '" + quote_for_message(line) + "' has no colon");
    const std::string_view name = line.substr(0, colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_http_token_char))
      return malformed(what, "invalid header name in '" + quote_for_message(line) + "'");
    const std::string_view value = trim_whitespace(line.substr(colon + 1));
    if (!std::all_of(value.begin(), value.end(), is_field_value_char))
      return malformed(what, "control character in header '" + quote_for_message(line) + "'");
    lines.headers.add(std::string(name), std::string(value));
  }
}

}  // namespace sluice
