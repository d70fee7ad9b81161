#include "engine/uri.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace sluice {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int hi = hex_value(text[i + 1]);
      int lo = hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

bool has_scheme(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  if (!std::isalpha(static_cast<unsigned char>(text[0]))) return false;
  return std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

std::optional<std::string> Uri::param(std::string_view name) const {
  for (const auto& [key, value] : params)
    if (key == name) return value;
  return std::nullopt;
}

std::string Uri::authority() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port) out += ":" + std::to_string(*port);
  return out;
}

Result<Uri> parse_uri(std::string_view text, PortZero zero) {
  auto bad = [&](std::string why) {
    return fail(std::errc::invalid_argument, "invalid URI '" + std::string(text) + "': " + why);
  };
  if (!has_scheme(text)) return bad("no scheme");
  Uri uri;
  auto colon = text.find(':');
  uri.scheme = std::string(text.substr(0, colon));
  std::transform(uri.scheme.begin(), uri.scheme.end(), uri.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view rest = text.substr(colon + 1);

  if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    uri.raw_query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
    std::string_view query = uri.raw_query;
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      if (!pair.empty()) {
        auto eq = pair.find('=');
        std::string key = percent_decode(pair.substr(0, eq));
        std::string value = eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
        uri.params.emplace_back(std::move(key), std::move(value));
      }
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }

  if (rest.substr(0, 2) == "//") {
    rest = rest.substr(2);
    auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
      std::string_view userinfo = authority.substr(0, at);
      authority = authority.substr(at + 1);
      auto pc = userinfo.find(':');
      uri.user = percent_decode(userinfo.substr(0, pc));
      if (pc != std::string_view::npos) uri.password = percent_decode(userinfo.substr(pc + 1));
    }
    std::string_view port_text;
    if (!authority.empty() && authority[0] == '[') {
      auto close = authority.find(']');
      if (close == std::string_view::npos) return bad("unterminated IPv6 address");
      uri.host = std::string(authority.substr(1, close - 1));
      std::string_view after = authority.substr(close + 1);
      if (!after.empty()) {
        if (after[0] != ':') return bad("junk after IPv6 address");
        port_text = after.substr(1);
      }
    } else {
      auto pc = authority.rfind(':');
      uri.host = percent_decode(authority.substr(0, pc));
      if (pc != std::string_view::npos) port_text = authority.substr(pc + 1);
    }
    if (!port_text.empty()) {
      unsigned value = 0;
      auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
      if (ec != std::errc{} || end != port_text.data() + port_text.size() || value > 65535 ||
          (value == 0 && zero == PortZero::refused))
        return bad("invalid port '" + std::string(port_text) + "'");
      uri.port = static_cast<std::uint16_t>(value);
    }
  }
  uri.raw_path = std::string(rest);
  uri.path = percent_decode(rest);
  return uri;
}

}  // namespace sluice
