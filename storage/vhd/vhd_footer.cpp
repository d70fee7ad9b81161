#include "storage/vhd/vhd_footer.hpp"

#include <cstdio>
#include <cstring>

#include "storage/vhd/vhd_bytes.hpp"

namespace sluice::vhd {

namespace {

tl::unexpected<Error> bad(std::string what) { return fail(std::errc::invalid_argument, std::move(what)); }

std::string quoted_chars(std::span<const std::byte> bytes) {
  std::string text;
  for (std::byte b : bytes) {
    auto c = std::to_integer<unsigned char>(b);
    if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      text += esc;
    }
  }
  return "'" + text + "'";
}

}  // namespace

std::string to_string(DiskType type) {
  switch (type) {
    case DiskType::fixed: return "fixed";
    case DiskType::dynamic: return "dynamic";
    case DiskType::differencing: return "differencing";
  }
  return "unknown";
}

std::string to_string(const Uid& uid) {
  std::string text;
  for (std::size_t i = 0; i < uid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", uid[i]);
    text += hex;
  }
  return text;
}

bool has_footer_cookie(std::span<const std::byte> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), "conectix", 8) == 0;
}

Result<Footer> parse_footer(std::span<const std::byte> bytes) {
  if (bytes.size() != footer_size) return bad("a footer is 512 bytes, not " + std::to_string(bytes.size()));
  if (!has_footer_cookie(bytes))
    return bad("the cookie is " + quoted_chars(bytes.first(8)) + ", not 'conectix'");
  Footer f;
  f.checksum = be32(bytes, 64);
  if (std::uint32_t sum = checksum(bytes, 64); sum != f.checksum)
    return bad("the checksum is " + hex32(f.checksum) + " but the bytes sum to " + hex32(sum));
  f.features = be32(bytes, 8);
  f.version = be32(bytes, 12);
  if (f.version >> 16 != 1) return bad("format version " + hex32(f.version) + " is not 1.x");
  f.data_offset = be64(bytes, 16);
  f.timestamp = be32(bytes, 24);
  for (std::size_t i = 28; i < 32; ++i) f.creator += static_cast<char>(std::to_integer<unsigned char>(bytes[i]));
  f.creator_version = be32(bytes, 32);
  f.creator_host_os = be32(bytes, 36);
  f.original_size = be64(bytes, 40);
  f.current_size = be64(bytes, 48);
  f.cylinders = be16(bytes, 56);
  f.heads = std::to_integer<std::uint8_t>(bytes[58]);
  f.sectors_per_track = std::to_integer<std::uint8_t>(bytes[59]);
  const std::uint32_t type = be32(bytes, 60);
  if (type != 2 && type != 3 && type != 4)
    return bad("disk type " + std::to_string(type) + " is not fixed (2), dynamic (3) or differencing (4)");
  f.disk_type = static_cast<DiskType>(type);
  for (std::size_t i = 0; i < 16; ++i) f.uid[i] = std::to_integer<std::uint8_t>(bytes[68 + i]);
  f.saved_state = bytes[84] != std::byte{0};
  return f;
}

}  // namespace sluice::vhd
