#include "protocols/nbd/transmission_messages.hpp"

#include <cstdio>
#include <limits>

#include "protocols/nbd/big_endian.hpp"
#include "protocols/nbd/wire_reader.hpp"
#include "protocols/nbd/wire_text.hpp"

namespace sluice::nbd {

namespace {

tl::unexpected<Error> malformed(std::string message) {
  return fail(std::errc::protocol_error, std::move(message));
}

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string n(std::uint64_t value) { return std::to_string(value); }

bool overflows(std::uint64_t offset, std::uint64_t length) {
  return length > std::numeric_limits<std::uint64_t>::max() - offset;
}

// "NBD OFFSET_HOLE chunk: ..." - every chunk complaint starts by naming the chunk.
std::string chunk_what(ReplyType type) { return "NBD " + to_string(type) + " chunk"; }

}  // namespace

// ---- Requests ----

void encode_request_header(const RequestHeader& header,
                           std::span<std::byte, request_header_size> out) {
  store_u32(out.subspan<0, 4>(), request_magic);
  store_u16(out.subspan<4, 2>(), header.flags);
  store_u16(out.subspan<6, 2>(), static_cast<std::uint16_t>(header.command));
  store_u64(out.subspan<8, 8>(), header.cookie);
  store_u64(out.subspan<16, 8>(), header.offset);
  store_u32(out.subspan<24, 4>(), header.length);
}

std::array<std::byte, request_header_size> encode_request_header(const RequestHeader& header) {
  std::array<std::byte, request_header_size> out{};
  encode_request_header(header, out);
  return out;
}

Result<RequestHeader> decode_request_header(std::span<const std::byte> bytes) {
  if (bytes.size() != request_header_size)
    return malformed("NBD request header is " + n(bytes.size()) + " bytes, expected 28");
  auto s = bytes.first<request_header_size>();
  const std::uint32_t magic = load_u32(s.subspan<0, 4>());
  if (magic != request_magic)
    return malformed("NBD request: magic is " + hex(magic) + ", expected " + hex(request_magic));
  RequestHeader header;
  header.flags = load_u16(s.subspan<4, 2>());
  header.command = static_cast<Command>(load_u16(s.subspan<6, 2>()));
  header.cookie = load_u64(s.subspan<8, 8>());
  header.offset = load_u64(s.subspan<16, 8>());
  header.length = load_u32(s.subspan<24, 4>());
  return header;
}

// ---- Replies ----

Result<ReplyKind> decode_reply_magic(std::span<const std::byte> first_bytes) {
  if (first_bytes.size() < reply_magic_size)
    return malformed("NBD reply: " + n(first_bytes.size()) +
                     " bytes are too few to hold the magic");
  const std::uint32_t magic = load_u32(first_bytes.first<reply_magic_size>());
  if (magic == simple_reply_magic) return ReplyKind::simple;
  if (magic == structured_reply_magic) return ReplyKind::structured;
  return malformed("NBD reply: magic is " + hex(magic) + ", expected " +
                   hex(simple_reply_magic) + " (simple) or " + hex(structured_reply_magic) +
                   " (structured)");
}

void encode_simple_reply_header(const SimpleReplyHeader& header,
                                std::span<std::byte, simple_reply_header_size> out) {
  store_u32(out.subspan<0, 4>(), simple_reply_magic);
  store_u32(out.subspan<4, 4>(), static_cast<std::uint32_t>(header.error));
  store_u64(out.subspan<8, 8>(), header.cookie);
}

std::array<std::byte, simple_reply_header_size> encode_simple_reply_header(
    const SimpleReplyHeader& header) {
  std::array<std::byte, simple_reply_header_size> out{};
  encode_simple_reply_header(header, out);
  return out;
}

Result<SimpleReplyHeader> decode_simple_reply_header(std::span<const std::byte> bytes) {
  if (bytes.size() != simple_reply_header_size)
    return malformed("NBD simple reply header is " + n(bytes.size()) + " bytes, expected 16");
  auto s = bytes.first<simple_reply_header_size>();
  const std::uint32_t magic = load_u32(s.subspan<0, 4>());
  if (magic != simple_reply_magic)
    return malformed("NBD simple reply: magic is " + hex(magic) + ", expected " +
                     hex(simple_reply_magic));
  return SimpleReplyHeader{static_cast<Errno>(load_u32(s.subspan<4, 4>())),
                           load_u64(s.subspan<8, 8>())};
}

void encode_chunk_header(const ChunkHeader& header, std::span<std::byte, chunk_header_size> out) {
  store_u32(out.subspan<0, 4>(), structured_reply_magic);
  store_u16(out.subspan<4, 2>(), header.flags);
  store_u16(out.subspan<6, 2>(), static_cast<std::uint16_t>(header.type));
  store_u64(out.subspan<8, 8>(), header.cookie);
  store_u32(out.subspan<16, 4>(), header.length);
}

std::array<std::byte, chunk_header_size> encode_chunk_header(const ChunkHeader& header) {
  std::array<std::byte, chunk_header_size> out{};
  encode_chunk_header(header, out);
  return out;
}

Result<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes) {
  if (bytes.size() != chunk_header_size)
    return malformed("NBD structured reply header is " + n(bytes.size()) +
                     " bytes, expected 20");
  auto s = bytes.first<chunk_header_size>();
  const std::uint32_t magic = load_u32(s.subspan<0, 4>());
  if (magic != structured_reply_magic)
    return malformed("NBD structured reply: magic is " + hex(magic) + ", expected " +
                     hex(structured_reply_magic));
  ChunkHeader h;
  h.flags = load_u16(s.subspan<4, 2>());
  h.type = static_cast<ReplyType>(load_u16(s.subspan<6, 2>()));
  h.cookie = load_u64(s.subspan<8, 8>());
  h.length = load_u32(s.subspan<16, 4>());

  const std::string what = chunk_what(h.type);
  auto bad_length = [&](std::string_view expected) {
    return malformed(what + ": length is " + n(h.length) + ", expected " + std::string(expected));
  };
  switch (h.type) {
    case ReplyType::none:
      if (h.length != 0) return bad_length("0");
      if (!h.done()) return malformed(what + " without the DONE flag");
      return h;
    case ReplyType::offset_data:
      if (h.length < offset_data_prefix_size + 1) return bad_length("at least 9");
      return h;
    case ReplyType::offset_hole:
      if (h.length != 12) return bad_length("12");
      return h;
    case ReplyType::block_status:
      if (h.length < 12 || (h.length - 4) % 8 != 0) return bad_length("4 + 8 per descriptor");
      if ((h.length - 4) / 8 > max_block_status_descriptors)
        return malformed(what + ": " + n((h.length - 4) / 8) + " descriptors, the limit is " +
                         n(max_block_status_descriptors));
      return h;
    case ReplyType::block_status_ext:
      return malformed(what + " needs extended headers, which were not negotiated");
    case ReplyType::error:
    case ReplyType::error_offset:
      break;
  }
  if (is_error(h.type)) {
    const std::uint32_t minimum = h.type == ReplyType::error_offset ? 14 : 6;
    if (h.length < minimum) return bad_length("at least " + n(minimum));
    if (h.length > max_error_chunk_length)
      return bad_length("at most " + n(max_error_chunk_length));
    return h;
  }
  std::string hint;
  if (static_cast<std::uint16_t>(h.type) == 3)
    hint = " (an old nbd.h numbered BLOCK_STATUS 3; the protocol says 5)";
  return malformed("NBD structured reply: unknown " + to_string(h.type) + hint);
}

// ---- Structured reply payloads ----

Result<OffsetData> decode_offset_data(std::span<const std::byte> payload) {
  const std::string what = chunk_what(ReplyType::offset_data);
  if (payload.size() < offset_data_prefix_size + 1)
    return malformed(what + ": payload is " + n(payload.size()) + " bytes, expected at least 9");
  if (payload.size() > std::numeric_limits<std::uint32_t>::max())
    return malformed(what + ": payload is " + n(payload.size()) +
                     " bytes, more than a chunk holds");
  auto range = decode_offset_data_prefix(payload.first(offset_data_prefix_size),
                                         static_cast<std::uint32_t>(payload.size()));
  if (!range) return tl::unexpected(range.error());
  return OffsetData{range->offset, payload.subspan(offset_data_prefix_size)};
}

Result<ContentRange> decode_offset_data_prefix(std::span<const std::byte> prefix,
                                               std::uint32_t chunk_length) {
  const std::string what = chunk_what(ReplyType::offset_data);
  if (prefix.size() != offset_data_prefix_size)
    return malformed(what + ": offset is " + n(prefix.size()) + " bytes, expected 8");
  if (chunk_length < offset_data_prefix_size + 1)
    return malformed(what + ": length is " + n(chunk_length) + ", expected at least 9");
  ContentRange range{load_u64(prefix.first<offset_data_prefix_size>()),
                     chunk_length - offset_data_prefix_size};
  if (overflows(range.offset, range.length))
    return malformed(what + ": " + n(range.length) + " bytes at offset " + n(range.offset) +
                     " run past the largest offset");
  return range;
}

Result<ContentRange> decode_offset_hole(std::span<const std::byte> payload) {
  const std::string what = chunk_what(ReplyType::offset_hole);
  if (payload.size() != 12)
    return malformed(what + ": payload is " + n(payload.size()) + " bytes, expected 12");
  auto s = payload.first<12>();
  ContentRange range{load_u64(s.subspan<0, 8>()), load_u32(s.subspan<8, 4>())};
  if (range.length == 0) return malformed(what + " at offset " + n(range.offset) + " is empty");
  if (overflows(range.offset, range.length))
    return malformed(what + ": " + n(range.length) + " bytes at offset " + n(range.offset) +
                     " run past the largest offset");
  return range;
}

Result<BlockStatus> decode_block_status(std::span<const std::byte> payload) {
  const std::string what = chunk_what(ReplyType::block_status);
  if (payload.size() < 12 || (payload.size() - 4) % 8 != 0)
    return malformed(what + ": payload is " + n(payload.size()) +
                     " bytes, expected 4 + 8 per descriptor with at least one");
  const std::size_t count = (payload.size() - 4) / 8;
  if (count > max_block_status_descriptors)
    return malformed(what + ": " + n(count) + " descriptors, the limit is " +
                     n(max_block_status_descriptors));
  WireReader in(payload);
  BlockStatus status;
  status.context_id = *in.u32();
  status.descriptors.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    BlockStatusDescriptor d{*in.u32(), *in.u32()};
    if (d.length == 0) return malformed(what + ": descriptor " + n(i) + " has length 0");
    status.descriptors.push_back(d);
  }
  return status;
}

ExtentKind extent_kind(std::uint32_t allocation_flags) {
  // HOLE counts as empty as well as ZERO, as vhd-tool treats them. The spec's letter is
  // narrower: HOLE means "unallocated", and only ZERO promises the bytes read as zeros,
  // so a server could report HOLE over bytes that read as something else. The servers
  // tested against (nbdkit's plugins, qemu-nbd) send HOLE only together with ZERO, and
  // copying an unallocated range as a hole is what a disk-image copy means. ZERO alone
  // is allocated zeros.
  if (allocation_flags & allocation_state::hole) return ExtentKind::hole;
  if (allocation_flags & allocation_state::zero) return ExtentKind::zero;
  return ExtentKind::data;
}

Result<std::vector<Extent>> to_extents(std::span<const BlockStatusDescriptor> descriptors,
                                       std::uint64_t base_offset) {
  std::vector<Extent> extents;
  extents.reserve(descriptors.size());
  std::uint64_t offset = base_offset;
  for (const BlockStatusDescriptor& d : descriptors) {
    if (overflows(offset, d.length))
      return malformed("NBD BLOCK_STATUS chunk: extents from offset " + n(base_offset) +
                       " run past the largest offset");
    extents.push_back(Extent{offset, d.length, extent_kind(d.flags)});
    offset += d.length;
  }
  return extents;
}

Result<ErrorChunk> decode_error_chunk(ReplyType type, std::span<const std::byte> payload) {
  const std::string what = chunk_what(type);
  if (!is_error(type)) return malformed(what + " is not an error chunk");
  const std::size_t fixed = type == ReplyType::error_offset ? 14 : 6;
  if (payload.size() < fixed)
    return malformed(what + ": payload is " + n(payload.size()) + " bytes, expected at least " +
                     n(fixed));
  WireReader in(payload);
  ErrorChunk chunk;
  chunk.error = static_cast<Errno>(*in.u32());
  const std::uint16_t message_length = *in.u16();
  if (chunk.error == Errno::none) return malformed(what + " carries error number 0");
  if (message_length > payload.size() - fixed)
    return malformed(what + ": message length " + n(message_length) + " exceeds the " +
                     n(payload.size() - fixed) + " bytes the payload leaves for it");
  chunk.message = to_text(*in.take(message_length));
  if (type == ReplyType::error_offset) {
    if (in.remaining() != 8)
      return malformed(what + ": " + n(in.remaining()) +
                       " bytes follow the message, expected the 8-byte offset");
    chunk.offset = *in.u64();
  }
  // Fields after the message of ERROR or of an unknown error type are not ours to read.
  return chunk;
}

// ---- Structured reply encoders ----

void encode_offset_data_header(std::uint64_t cookie, std::uint16_t flags, std::uint64_t offset,
                               std::uint32_t data_length,
                               std::span<std::byte, offset_data_header_size> out) {
  encode_chunk_header({flags, ReplyType::offset_data, cookie,
                       static_cast<std::uint32_t>(offset_data_prefix_size + data_length)},
                      out.first<chunk_header_size>());
  store_u64(out.subspan<chunk_header_size, 8>(), offset);
}

std::array<std::byte, offset_hole_chunk_size> encode_offset_hole(std::uint64_t cookie,
                                                                 std::uint16_t flags,
                                                                 std::uint64_t offset,
                                                                 std::uint32_t length) {
  std::array<std::byte, offset_hole_chunk_size> out{};
  std::span<std::byte, offset_hole_chunk_size> s(out);
  encode_chunk_header({flags, ReplyType::offset_hole, cookie, 12}, s.first<chunk_header_size>());
  store_u64(s.subspan<chunk_header_size, 8>(), offset);
  store_u32(s.subspan<chunk_header_size + 8, 4>(), length);
  return out;
}

std::array<std::byte, chunk_header_size> encode_none_chunk(std::uint64_t cookie) {
  return encode_chunk_header({reply_flag::done, ReplyType::none, cookie, 0});
}

Result<std::vector<std::byte>> encode_block_status(
    std::uint64_t cookie, std::uint16_t flags, std::uint32_t context_id,
    std::span<const BlockStatusDescriptor> descriptors) {
  if (descriptors.empty())
    return fail(std::errc::invalid_argument, "an NBD BLOCK_STATUS chunk needs a descriptor");
  if (descriptors.size() > max_block_status_descriptors)
    return fail(std::errc::invalid_argument,
                "an NBD BLOCK_STATUS chunk holds at most " + n(max_block_status_descriptors) +
                    " descriptors, not " + n(descriptors.size()));
  const auto length = static_cast<std::uint32_t>(4 + 8 * descriptors.size());
  std::vector<std::byte> out;
  out.reserve(chunk_header_size + length);
  auto header = encode_chunk_header({flags, ReplyType::block_status, cookie, length});
  append_bytes(out, header);
  append_u32(out, context_id);
  for (const BlockStatusDescriptor& d : descriptors) {
    if (d.length == 0)
      return fail(std::errc::invalid_argument, "an NBD BLOCK_STATUS descriptor has length 0");
    append_u32(out, d.length);
    append_u32(out, d.flags);
  }
  return out;
}

std::vector<std::byte> encode_error_chunk(std::uint64_t cookie, std::uint16_t flags,
                                          Errno error, std::string_view message,
                                          std::optional<std::uint64_t> offset) {
  const std::string_view text = cut_utf8(message, max_string_length);
  const auto length =
      static_cast<std::uint32_t>(6 + text.size() + (offset ? offset_data_prefix_size : 0));
  const ReplyType type = offset ? ReplyType::error_offset : ReplyType::error;
  std::vector<std::byte> out;
  out.reserve(chunk_header_size + length);
  append_bytes(out, encode_chunk_header({flags, type, cookie, length}));
  append_u32(out, static_cast<std::uint32_t>(error == Errno::none ? Errno::eio : error));
  append_u16(out, static_cast<std::uint16_t>(text.size()));
  append_bytes(out, text_bytes(text));
  if (offset) append_u64(out, *offset);
  return out;
}

}  // namespace sluice::nbd
