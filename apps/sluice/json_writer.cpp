#include "apps/sluice/json_writer.hpp"

#include <cstdio>

namespace sluice::cli {

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text`, or 0 when the
// bytes there are not one (a stray continuation byte, a truncated sequence, an overlong
// form, a surrogate, or beyond U+10FFFF).
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  return length;
}

}  // namespace

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const char c = text.front();
    std::size_t consumed = 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else if (std::size_t n = utf8_sequence(text); n > 0) {
          out += text.substr(0, n);
          consumed = n;
        } else {
          // JSON text is UTF-8: a byte that is not (a Latin-1 file name, say) becomes
          // U+FFFD, so the document stays valid for every parser.
          out += "\\ufffd";
        }
    }
    text.remove_prefix(consumed);
  }
  return out;
}

void JsonObject::key(std::string_view name) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(name) + "\":";
}

JsonObject& JsonObject::add(std::string_view name, std::uint64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, double value) {
  key(name);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  body_ += buf;
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, std::string_view value) {
  key(name);
  body_ += "\"" + json_escape(value) + "\"";
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add_raw(std::string_view name, std::string_view json) {
  key(name);
  body_ += json;
  return *this;
}

}  // namespace sluice::cli
