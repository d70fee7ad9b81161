#include "protocols/http/message_head.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {

namespace {

constexpr std::string_view crlf = "\r\n";
constexpr std::string_view end_of_head = "\r\n\r\n";

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
  const std::size_t before = head_.size();
  // The terminator may straddle the previous feed (one-byte feeds are legal).
  const std::size_t search_from = before >= 3 ? before - 3 : 0;
  const std::size_t take = std::min(bytes.size(), max_http_head_size - before);
  head_.append(bytes.substr(0, take));
  if (auto end = head_.find(end_of_head, search_from); end != std::string::npos) {
    head_.resize(end + end_of_head.size());
    complete_ = true;
    return head_.size() - before;
  }
  if (head_.size() >= max_http_head_size)
    return fail(std::errc::message_size, "the " + what_ + " has headers over " +
                                             std::to_string(max_http_head_size / 1024) + " KiB without ending");
  return take;
}

Result<HttpHeadLines> split_http_head(std::string_view head, std::string_view what) {
  if (head.size() < end_of_head.size() || head.substr(head.size() - end_of_head.size()) != end_of_head)
    return malformed(what, "the head does not end with an empty line");
  // Every line, the start line included, keeps its CRLF; the final bare CRLF goes.
  std::string_view rest = head.substr(0, head.size() - crlf.size());
  HttpHeadLines lines;
  bool first = true;
  while (!rest.empty()) {
    const std::size_t eol = rest.find(crlf);  // present: each line was CRLF-terminated
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + crlf.size());
    if (line.find_first_of("\r\n") != std::string_view::npos)
      return malformed(what, "bare CR or LF in line '" + quote_for_message(line) + "'");
    if (first) {
      lines.start_line = line;
      first = false;
      continue;
    }
    if (line.empty() || line.front() == ' ' || line.front() == '\t')
      return malformed(what, "folded or empty header line '" + quote_for_message(line) + "'");
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
  return lines;
}

}  // namespace sluice
