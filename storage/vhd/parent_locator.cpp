#include "storage/vhd/parent_locator.hpp"

#include <cctype>

#include "storage/vhd/utf16.hpp"
#include "storage/vhd/vhd_bytes.hpp"

namespace sluice::vhd {

namespace {

tl::unexpected<Error> bad(std::string what) { return fail(std::errc::invalid_argument, std::move(what)); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::optional<LocatedPath>> decode_file_url(std::span<const std::byte> data) {
  std::string url;
  for (std::byte b : data) {
    if (b == std::byte{0}) break;
    url += static_cast<char>(std::to_integer<unsigned char>(b));
  }
  constexpr std::string_view scheme = "file://";
  if (!url.starts_with(scheme)) return bad("the MacX locator '" + url + "' is not a file:// URL");
  std::string rest = url.substr(scheme.size());
  if (rest.starts_with("localhost/")) rest = rest.substr(9);
  std::string path;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && hex_value(rest[i + 1]) >= 0 && hex_value(rest[i + 2]) >= 0) {
      path += static_cast<char>(hex_value(rest[i + 1]) * 16 + hex_value(rest[i + 2]));
      i += 2;
    } else {
      path += rest[i];
    }
  }
  if (path.empty()) return bad("the MacX locator '" + url + "' names no file");
  return LocatedPath{path, false};
}

Result<std::optional<LocatedPath>> decode_windows_path(std::span<const std::byte> data) {
  std::string path = utf16_to_utf8(data, ByteOrder::little);
  for (char& c : path)
    if (c == '\\') c = '/';
  if (path.starts_with("//?/")) path = path.substr(4);
  if (path.empty()) return bad("the Windows locator names no file");
  const bool drive = path.size() >= 2 && path[1] == ':' && std::isalpha(static_cast<unsigned char>(path[0]));
  return LocatedPath{path, drive};
}

}  // namespace

std::string platform_name(std::uint32_t code) {
  std::string name;
  for (int shift = 24; shift >= 0; shift -= 8) {
    char c = static_cast<char>((code >> shift) & 0xff);
    if (!std::isprint(static_cast<unsigned char>(c))) return hex32(code);
    name += c;
  }
  return name;
}

Result<std::optional<LocatedPath>> decode_parent_locator(std::uint32_t platform_code,
                                                         std::span<const std::byte> data) {
  switch (platform_code) {
    case platform_macx: return decode_file_url(data);
    case platform_w2ku:
    case platform_w2ru: return decode_windows_path(data);
    default: return std::optional<LocatedPath>{};
  }
}

}  // namespace sluice::vhd
