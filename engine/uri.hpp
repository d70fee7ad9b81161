// URIs as libnbd and vhd-tool users write them: scheme://[user[:password]@]host[:port]/path?query
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/error.hpp"

namespace sluice {

struct Uri {
  std::string scheme;  // lower case, e.g. "nbds+unix"
  std::string user;
  std::string password;
  std::string host;  // without IPv6 brackets
  std::optional<std::uint16_t> port;
  std::string path;      // percent-decoded
  std::string raw_path;  // as written, for forwarding (an HTTP request line)
  std::string raw_query;
  std::vector<std::pair<std::string, std::string>> params;  // decoded query pairs

  std::optional<std::string> param(std::string_view name) const;
  // host:port as written in a Host header (IPv6 in brackets).
  std::string authority() const;
};

// True if `text` starts with "letters:" and so is meant as a URI, not a path.
bool has_scheme(std::string_view text);

// Port 0 is a listener's request for any free port; a peer is never there, so only a
// URI to listen on may have it.
enum class PortZero { refused, allowed };
Result<Uri> parse_uri(std::string_view text, PortZero zero = PortZero::refused);

std::string percent_decode(std::string_view text);

}  // namespace sluice
