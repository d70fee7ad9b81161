#include "protocols/chunked/chunk_header.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace sluice {

namespace {

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();
// vhd-tool reads the length field as a signed int32.
constexpr std::uint32_t max_encodable_length = std::numeric_limits<std::int32_t>::max();

bool sector_aligned(std::uint64_t value) { return value % chunk_sector_size == 0; }

tl::unexpected<Error> bad_chunk(std::uint64_t offset, const std::string& why) {
  return fail(std::errc::protocol_error, "chunk at offset " + std::to_string(offset) + ": " + why);
}

void put_le(std::byte* out, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

std::uint64_t get_le(const std::byte* in, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= std::to_integer<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

Status check_max_length(std::uint32_t max_length, const char* what) {
  if (max_length == 0 || !sector_aligned(max_length))
    return fail(std::errc::invalid_argument, std::string(what) + " " + std::to_string(max_length) +
                                                 " is not a positive multiple of 512");
  if (max_length > max_chunk_length_ceiling)
    return fail(std::errc::invalid_argument, std::string(what) + " " + std::to_string(max_length) +
                                                 " exceeds the ceiling of " +
                                                 std::to_string(max_chunk_length_ceiling));
  return {};
}

}  // namespace

Status encode_chunk_header(const ChunkHeader& header, std::span<std::byte> out) {
  if (out.size() < chunk_header_size)
    return fail(std::errc::no_buffer_space, "chunk at offset " + std::to_string(header.offset) +
                                                ": header needs 12 bytes, the space before the payload has " +
                                                std::to_string(out.size()));
  if (header.length > max_encodable_length)
    return bad_chunk(header.offset, "length " + std::to_string(header.length) +
                                        " does not fit vhd-tool's signed 32-bit length field");
  put_le(out.data(), header.offset, 8);
  put_le(out.data() + 8, header.length, 4);
  return {};
}

Result<std::array<std::byte, chunk_header_size>> encode_chunk_header(const ChunkHeader& header) {
  std::array<std::byte, chunk_header_size> bytes{};
  if (auto status = encode_chunk_header(header, bytes); !status) return tl::unexpected(status.error());
  return bytes;
}

Result<ChunkHeader> read_chunk_header(std::span<const std::byte> bytes) {
  if (bytes.size() < chunk_header_size)
    return fail(std::errc::protocol_error, "truncated chunk header: got " + std::to_string(bytes.size()) +
                                               " of 12 bytes");
  return ChunkHeader{get_le(bytes.data(), 8), static_cast<std::uint32_t>(get_le(bytes.data() + 8, 4))};
}

Status check_chunk_limits(const ChunkLimits& limits) {
  return check_max_length(limits.max_length, "maximum chunk length");
}

Status validate_chunk_header(const ChunkHeader& header, const ChunkLimits& limits) {
  if (header.is_terminator()) return {};
  const std::uint64_t offset = header.offset;
  const std::uint64_t length = header.length;
  if (length == 0) return bad_chunk(offset, "zero length is only valid for the terminator (offset 0)");
  if (!sector_aligned(offset)) return bad_chunk(offset, "offset is not a multiple of 512");
  if (!sector_aligned(length))
    return bad_chunk(offset, "length " + std::to_string(length) + " is not a multiple of 512");
  // A misconfigured limit must not lift the ceiling: it bounds the receiver's memory.
  const std::uint64_t max_length = std::min(limits.max_length, max_chunk_length_ceiling);
  if (length > max_length)
    return bad_chunk(offset, "length " + std::to_string(length) + " exceeds the maximum chunk length " +
                                 std::to_string(max_length));
  if (offset > max_u64 - length)
    return bad_chunk(offset, "length " + std::to_string(length) + " overflows a 64-bit offset");
  const std::uint64_t end = offset + length;
  // Both ends are sector multiples, so `end - image_size < 512` means the chunk
  // overhangs only into the padding of the image's last, partial sector.
  if (end > limits.image_size && end - limits.image_size >= chunk_sector_size)
    return bad_chunk(offset, "length " + std::to_string(length) + " ends at " + std::to_string(end) +
                                 ", beyond the image size " + std::to_string(limits.image_size));
  return {};
}

Result<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes, const ChunkLimits& limits) {
  auto header = read_chunk_header(bytes);
  if (!header) return header;
  if (auto status = validate_chunk_header(*header, limits); !status) return tl::unexpected(status.error());
  return header;
}

Result<std::uint64_t> sector_padded_size(std::uint64_t image_size) {
  const std::uint64_t partial = image_size % chunk_sector_size;
  if (partial == 0) return image_size;
  const std::uint64_t padding = chunk_sector_size - partial;
  if (image_size > max_u64 - padding)
    return fail(std::errc::value_too_large,
                "image size " + std::to_string(image_size) + " cannot be padded to a whole sector");
  return image_size + padding;
}

Result<ChunkPlanner> ChunkPlanner::create(std::uint64_t offset, std::uint64_t length,
                                          std::uint32_t max_length) {
  if (auto status = check_max_length(max_length, "chunk length"); !status)
    return tl::unexpected(status.error());
  auto bad_extent = [&](const std::string& why) {
    return fail(std::errc::invalid_argument, "extent at offset " + std::to_string(offset) + ": " + why);
  };
  if (!sector_aligned(offset)) return bad_extent("offset is not a multiple of 512");
  if (!sector_aligned(length))
    return bad_extent("length " + std::to_string(length) +
                      " is not a multiple of 512 (pad the image to a whole sector first)");
  if (offset > max_u64 - length)
    return bad_extent("length " + std::to_string(length) + " overflows a 64-bit offset");
  return ChunkPlanner(offset, offset + length, max_length);
}

std::optional<ChunkHeader> ChunkPlanner::next() {
  if (next_offset_ == end_) return std::nullopt;
  const auto length = static_cast<std::uint32_t>(std::min<std::uint64_t>(max_length_, end_ - next_offset_));
  ChunkHeader chunk{next_offset_, length};
  next_offset_ += length;
  return chunk;
}

}  // namespace sluice
