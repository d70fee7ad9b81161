// The Chunked wire format of xen-api's vhd-tool: a one-way stream of
// `header || payload` records, where the header is 12 little-endian bytes (u64 byte
// offset on the destination, u32 payload length) and 12 zero bytes end the stream.
// There are no replies, so the receiver is the only place a bad header can be caught:
// the decoder checks everything vhd-tool's own receiver asserts (sector alignment),
// plus what it merely assumes (a sane length, the image's bounds).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "engine/error.hpp"

namespace sluice {

constexpr std::size_t chunk_header_size = 12;
constexpr std::uint32_t chunk_sector_size = 512;
// What vhd-tool sends (4096 sectors) and what its receiver reads at a time.
constexpr std::uint32_t default_max_chunk_length = 2u << 20;
// No configuration may raise the limit past this: a receiver holds a whole chunk's
// worth of buffers, so the peer must not choose how much memory that is.
constexpr std::uint32_t max_chunk_length_ceiling = 32u << 20;

struct ChunkHeader {
  std::uint64_t offset = 0;
  std::uint32_t length = 0;

  // vhd-tool's receiver stops only when both fields are zero.
  bool is_terminator() const { return offset == 0 && length == 0; }
  friend bool operator==(const ChunkHeader&, const ChunkHeader&) = default;
};

constexpr ChunkHeader chunk_terminator{};
constexpr std::array<std::byte, chunk_header_size> chunk_terminator_bytes{};

// Writes the 12 header bytes into out[0, 12), typically the headroom just before the
// payload so header and payload leave in one write. Refuses a span shorter than 12
// bytes and a length of 2^31 or more, which vhd-tool decodes as a negative int32.
Status encode_chunk_header(const ChunkHeader& header, std::span<std::byte> out);
Result<std::array<std::byte, chunk_header_size>> encode_chunk_header(const ChunkHeader& header);

// Just the bytes: fails only when fewer than 12 were given (a stream cut mid-header).
Result<ChunkHeader> read_chunk_header(std::span<const std::byte> bytes);

struct ChunkLimits {
  // The destination's size. A chunk may end past it only within the last sector,
  // because senders pad an image to a whole sector (sector_padded_size); the receiver
  // writes only the part inside the image.
  std::uint64_t image_size = 0;
  // Longest payload accepted; raised above vhd-tool's 2 MiB only for tolerance of
  // other senders, and never honoured past max_chunk_length_ceiling.
  std::uint32_t max_length = default_max_chunk_length;
};

// For configuration time: a maximum that is not a positive multiple of 512 or is over
// the ceiling is refused here rather than silently clamped later.
Status check_chunk_limits(const ChunkLimits& limits);

// Everything a receiver must know before trusting a header: the terminator, or a
// non-empty, sector-aligned chunk no longer than the limit that lies inside the image.
// Errors name the chunk's offset: "chunk at offset 1048577: offset is not a multiple of 512".
Status validate_chunk_header(const ChunkHeader& header, const ChunkLimits& limits);

// read_chunk_header then validate_chunk_header.
Result<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes, const ChunkLimits& limits);

// An image whose size is not a multiple of 512 is sent as if padded with zeros to the
// next sector, as vhd-tool does; this is that padded size. Fails only on overflow.
Result<std::uint64_t> sector_padded_size(std::uint64_t image_size);

// Splits one data extent into chunks the way vhd-tool's expand_copy does: pieces of
// max_length from the extent's start, then the remainder. Pieces are aligned to the
// extent, not to multiples of max_length. Allocation-free, since a large image has
// millions of chunks.
class ChunkPlanner {
 public:
  // The extent must be sector aligned at both ends (pad the image's last extent with
  // sector_padded_size first) and max_length a positive multiple of 512 no larger
  // than the ceiling.
  static Result<ChunkPlanner> create(std::uint64_t offset, std::uint64_t length,
                                     std::uint32_t max_length = default_max_chunk_length);

  // The next chunk, or nullopt once the extent is covered.
  std::optional<ChunkHeader> next();
  std::uint64_t remaining() const { return end_ - next_offset_; }

 private:
  ChunkPlanner(std::uint64_t offset, std::uint64_t end, std::uint32_t max_length)
      : next_offset_(offset), end_(end), max_length_(max_length) {}

  std::uint64_t next_offset_;
  std::uint64_t end_;
  std::uint32_t max_length_;
};

}  // namespace sluice
