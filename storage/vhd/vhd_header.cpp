#include "storage/vhd/vhd_header.hpp"

#include <bit>
#include <cstring>

#include "storage/vhd/utf16.hpp"
#include "storage/vhd/vhd_bytes.hpp"

namespace sluice::vhd {

namespace {
tl::unexpected<Error> bad(std::string what) { return fail(std::errc::invalid_argument, std::move(what)); }
}  // namespace

Result<Header> parse_header(std::span<const std::byte> bytes) {
  if (bytes.size() != header_size) return bad("a dynamic header is 1024 bytes, not " + std::to_string(bytes.size()));
  if (std::memcmp(bytes.data(), "cxsparse", 8) != 0) return bad("the cookie is not 'cxsparse'");
  Header h;
  h.checksum = be32(bytes, 36);
  if (std::uint32_t sum = checksum(bytes, 36); sum != h.checksum)
    return bad("the checksum is " + hex32(h.checksum) + " but the bytes sum to " + hex32(sum));
  h.table_offset = be64(bytes, 16);
  h.version = be32(bytes, 24);
  if (h.version >> 16 != 1) return bad("header version " + hex32(h.version) + " is not 1.x");
  h.max_table_entries = be32(bytes, 28);
  h.block_size = be32(bytes, 32);
  if (!std::has_single_bit(h.block_size))
    return bad("the block size " + std::to_string(h.block_size) + " is not a power of two");
  if (h.block_size < min_block_size || h.block_size > max_block_size)
    return bad("the block size " + std::to_string(h.block_size) + " is outside 512 bytes to 1 GiB");
  for (std::size_t i = 0; i < 16; ++i) h.parent_uid[i] = std::to_integer<std::uint8_t>(bytes[40 + i]);
  h.parent_timestamp = be32(bytes, 56);
  h.parent_name = utf16_to_utf8(bytes.subspan(64, 512), ByteOrder::big);
  for (std::size_t i = 0; i < h.locators.size(); ++i) {
    const std::size_t at = 576 + 24 * i;
    h.locators[i] = {be32(bytes, at), be32(bytes, at + 4), be32(bytes, at + 8), be64(bytes, at + 16)};
  }
  return h;
}

}  // namespace sluice::vhd
