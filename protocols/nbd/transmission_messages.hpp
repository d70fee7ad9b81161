// NBD transmission messages: requests, simple replies and structured reply chunks, as
// pure functions (no extended headers).
//
// Headers encode into caller-provided fixed-size spans, so a request header or an
// OFFSET_DATA chunk header can be written into a buffer's headroom directly in front of
// its payload and leave as one contiguous send (one TLS record). Decoders take what a
// peer read: a fixed-size header first (its decoder bounds and checks the length that
// follows against the chunk type), then exactly that many payload bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.hpp"
#include "engine/extent.hpp"
#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

// ---- Requests (client to server) ----

// Magic, 16 bits flags, 16 bits type, 64 bits cookie, 64 bits offset, 32 bits length;
// WRITE's data follows.
inline constexpr std::size_t request_header_size = 28;

struct RequestHeader {
  std::uint16_t flags = 0;  // command_flag bits
  Command command = Command::read;
  std::uint64_t cookie = 0;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  friend bool operator==(const RequestHeader&, const RequestHeader&) = default;
};

void encode_request_header(const RequestHeader& header,
                           std::span<std::byte, request_header_size> out);
std::array<std::byte, request_header_size> encode_request_header(const RequestHeader& header);
// Server side: checks the magic only. Unknown commands and flags decode as they are, so
// the server can answer them with EINVAL instead of dropping the connection.
Result<RequestHeader> decode_request_header(std::span<const std::byte> bytes);

// ---- Replies (server to client) ----

// Which header a reply starts with, from its first 4 bytes. Every reply header is at
// least 16 bytes, so a client can read simple_reply_header_size bytes, look here, and
// read the 4 more a structured chunk header needs.
enum class ReplyKind : std::uint8_t { simple, structured };
inline constexpr std::size_t reply_magic_size = 4;
Result<ReplyKind> decode_reply_magic(std::span<const std::byte> first_bytes);

// Magic, 32 bits error, 64 bits cookie; a successful READ's data follows.
inline constexpr std::size_t simple_reply_header_size = 16;

struct SimpleReplyHeader {
  Errno error = Errno::none;
  std::uint64_t cookie = 0;
  friend bool operator==(const SimpleReplyHeader&, const SimpleReplyHeader&) = default;
};

void encode_simple_reply_header(const SimpleReplyHeader& header,
                                std::span<std::byte, simple_reply_header_size> out);
std::array<std::byte, simple_reply_header_size> encode_simple_reply_header(
    const SimpleReplyHeader& header);
Result<SimpleReplyHeader> decode_simple_reply_header(std::span<const std::byte> bytes);

// Magic, 16 bits flags, 16 bits type, 64 bits cookie, 32 bits payload length.
inline constexpr std::size_t chunk_header_size = 20;

struct ChunkHeader {
  std::uint16_t flags = 0;  // reply_flag bits
  ReplyType type = ReplyType::none;
  std::uint64_t cookie = 0;
  std::uint32_t length = 0;  // of the payload that follows

  bool done() const { return (flags & reply_flag::done) != 0; }
  friend bool operator==(const ChunkHeader&, const ChunkHeader&) = default;
};

// At most this many descriptors in one BLOCK_STATUS chunk (the spec's bound).
inline constexpr std::uint32_t max_block_status_descriptors = 1u << 20;
// Error chunk payloads beyond their fixed fields and a 4096-byte message are refused:
// a client reads them whole into memory.
inline constexpr std::uint32_t max_error_chunk_length = 14 + max_string_length;

void encode_chunk_header(const ChunkHeader& header, std::span<std::byte, chunk_header_size> out);
std::array<std::byte, chunk_header_size> encode_chunk_header(const ChunkHeader& header);
// Checks the magic and that the length suits the type before any payload is read:
// NONE is empty and final, OFFSET_DATA at least 9, OFFSET_HOLE exactly 12, BLOCK_STATUS
// 4 + 8n with 1 <= n <= 2^20, error chunks at least 6 (14 with an offset) and at most
// max_error_chunk_length. Unknown types with bit 15 set are errors the client can
// still read; other unknown types (and BLOCK_STATUS_EXT, which needs extended headers)
// are refused.
Result<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes);

// ---- Structured reply payloads ----

struct OffsetData {
  std::uint64_t offset = 0;
  std::span<const std::byte> data;  // a view into the decoded payload
};
// The whole payload in memory.
Result<OffsetData> decode_offset_data(std::span<const std::byte> payload);

// For a reader that puts the data straight into its destination: read only the 8-byte
// offset, learn where the data goes, then read the data.
inline constexpr std::size_t offset_data_prefix_size = 8;
struct ContentRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t end() const { return offset + length; }
  friend bool operator==(const ContentRange&, const ContentRange&) = default;
};
// `chunk_length` is the header's length (already checked to be at least 9).
Result<ContentRange> decode_offset_data_prefix(std::span<const std::byte> prefix,
                                               std::uint32_t chunk_length);

// OFFSET_HOLE: 64 bits offset, 32 bits hole size (non-zero).
Result<ContentRange> decode_offset_hole(std::span<const std::byte> payload);

struct BlockStatusDescriptor {
  std::uint32_t length = 0;  // non-zero
  std::uint32_t flags = 0;   // allocation_state bits for base:allocation
  friend bool operator==(const BlockStatusDescriptor&, const BlockStatusDescriptor&) = default;
};
struct BlockStatus {
  std::uint32_t context_id = 0;
  std::vector<BlockStatusDescriptor> descriptors;
  friend bool operator==(const BlockStatus&, const BlockStatus&) = default;
};
Result<BlockStatus> decode_block_status(std::span<const std::byte> payload);

// base:allocation flags as an extent kind: HOLE (with or without ZERO) is a hole, ZERO
// alone is allocated zeros, anything else, including unknown bits, is data. Treating
// HOLE without ZERO as empty goes beyond the spec's letter (see the definition and
// docs/protocols/nbd-client.md).
ExtentKind extent_kind(std::uint32_t allocation_flags);
// Descriptors as consecutive extents from `base_offset` (the request's offset).
// Refuses a map that would run past 2^64.
Result<std::vector<Extent>> to_extents(std::span<const BlockStatusDescriptor> descriptors,
                                       std::uint64_t base_offset);

struct ErrorChunk {
  Errno error = Errno::eio;
  std::string message;                  // the server's text, may be empty
  std::optional<std::uint64_t> offset;  // ERROR_OFFSET only
  friend bool operator==(const ErrorChunk&, const ErrorChunk&) = default;
};
// ERROR, ERROR_OFFSET, or an unknown error type (read like ERROR). The message must fit
// the payload; ERROR_OFFSET's offset must follow it exactly; the error must be non-zero.
Result<ErrorChunk> decode_error_chunk(ReplyType type, std::span<const std::byte> payload);

// ---- Structured reply encoders (server side) ----

// The 20-byte chunk header and the 8-byte offset that precede OFFSET_DATA's data, to be
// written into the data buffer's headroom. `data_length` is at most 2^32 - 9 (a server
// splits longer reads into several chunks).
inline constexpr std::size_t offset_data_header_size = chunk_header_size + offset_data_prefix_size;
void encode_offset_data_header(std::uint64_t cookie, std::uint16_t flags, std::uint64_t offset,
                               std::uint32_t data_length,
                               std::span<std::byte, offset_data_header_size> out);

inline constexpr std::size_t offset_hole_chunk_size = chunk_header_size + 12;
std::array<std::byte, offset_hole_chunk_size> encode_offset_hole(std::uint64_t cookie,
                                                                 std::uint16_t flags,
                                                                 std::uint64_t offset,
                                                                 std::uint32_t length);

// The final NONE chunk.
std::array<std::byte, chunk_header_size> encode_none_chunk(std::uint64_t cookie);

// Refuses an empty list, more than max_block_status_descriptors, and zero lengths.
Result<std::vector<std::byte>> encode_block_status(
    std::uint64_t cookie, std::uint16_t flags, std::uint32_t context_id,
    std::span<const BlockStatusDescriptor> descriptors);

// ERROR, or ERROR_OFFSET when `offset` is given. An error chunk must carry an error, so
// Errno::none is sent as EIO; a message over 4096 bytes is cut at a character boundary.
std::vector<std::byte> encode_error_chunk(std::uint64_t cookie, std::uint16_t flags,
                                          Errno error, std::string_view message,
                                          std::optional<std::uint64_t> offset = std::nullopt);

}  // namespace sluice::nbd
