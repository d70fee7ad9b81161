// Strings on the NBD wire: bytes without a terminator, at most 4096 of them, UTF-8 by
// promise only. These helpers convert, cut and make a peer's text safe to print.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace sluice::nbd {

inline std::string to_text(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

inline std::span<const std::byte> text_bytes(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

// At most `limit` bytes of `text`, without splitting a UTF-8 sequence.
inline std::string_view cut_utf8(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return text.substr(0, end);
}

// A peer's text for an error message or a log: cut to `limit` bytes, and control
// characters replaced so nothing a server sends can move a terminal's cursor.
inline std::string printable(std::string_view text, std::size_t limit) {
  std::string out(cut_utf8(text, limit));
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

}  // namespace sluice::nbd
