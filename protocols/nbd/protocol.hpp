// The NBD protocol's vocabulary: magics, option and reply numbers, flags, commands and
// error numbers, as the spec (NetworkBlockDevice/nbd doc/proto.md) defines them, plus
// names for messages. Extended headers are not spoken; their numbers are listed only so
// that a peer mentioning them gets a readable name.
//
// Values a peer sends are kept in scoped enums even when unknown (an enum holds any
// value of its underlying type), so a decoder never loses what was on the wire and
// to_string() can name it ("option 42").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace sluice::nbd {

inline constexpr std::uint16_t default_port = 10809;
// Names, descriptions and error messages: "MUST be no longer than 4096 bytes".
inline constexpr std::size_t max_string_length = 4096;
inline constexpr std::string_view base_allocation_context = "base:allocation";

// ---- Handshake ----

inline constexpr std::uint64_t nbd_magic = 0x4e42444d41474943;           // "NBDMAGIC"
inline constexpr std::uint64_t option_magic = 0x49484156454f5054;        // "IHAVEOPT"
inline constexpr std::uint64_t oldstyle_magic = 0x0000420281861253;      // cliserv_magic
inline constexpr std::uint64_t option_reply_magic = 0x0003e889045565a9;

// Sent by the server in the greeting (16 bits).
namespace handshake_flag {
inline constexpr std::uint16_t fixed_newstyle = 1u << 0;
inline constexpr std::uint16_t no_zeroes = 1u << 1;
inline constexpr std::uint16_t known = fixed_newstyle | no_zeroes;
}  // namespace handshake_flag

// Sent by the client in reply to the greeting (32 bits).
namespace client_flag {
inline constexpr std::uint32_t fixed_newstyle = 1u << 0;
inline constexpr std::uint32_t no_zeroes = 1u << 1;
inline constexpr std::uint32_t known = fixed_newstyle | no_zeroes;
}  // namespace client_flag

enum class Option : std::uint32_t {
  export_name = 1,
  abort = 2,
  list = 3,
  peek_export = 4,  // withdrawn
  starttls = 5,
  info = 6,
  go = 7,
  structured_reply = 8,
  list_meta_context = 9,
  set_meta_context = 10,
  extended_headers = 11,  // not spoken by Sluice
};

enum class OptionReplyType : std::uint32_t {
  ack = 1,
  server = 2,
  info = 3,
  meta_context = 4,
  err_unsup = 0x80000001,
  err_policy = 0x80000002,
  err_invalid = 0x80000003,
  err_platform = 0x80000004,
  err_tls_reqd = 0x80000005,
  err_unknown = 0x80000006,
  err_shutdown = 0x80000007,
  err_block_size_reqd = 0x80000008,
  err_too_big = 0x80000009,
  err_ext_header_reqd = 0x8000000a,
};

// Every error reply has bit 31 set, including ones this code has never heard of.
constexpr bool is_error(OptionReplyType type) {
  return (static_cast<std::uint32_t>(type) & 0x80000000u) != 0;
}

// The first two bytes of an NBD_REP_INFO payload.
enum class InfoType : std::uint16_t {
  export_info = 0,  // NBD_INFO_EXPORT: size and transmission flags
  name = 1,
  description = 2,
  block_size = 3,
};

// Sent by the server with the export's size (16 bits).
namespace transmission_flag {
inline constexpr std::uint16_t has_flags = 1u << 0;
inline constexpr std::uint16_t read_only = 1u << 1;
inline constexpr std::uint16_t send_flush = 1u << 2;
inline constexpr std::uint16_t send_fua = 1u << 3;
inline constexpr std::uint16_t rotational = 1u << 4;
inline constexpr std::uint16_t send_trim = 1u << 5;
inline constexpr std::uint16_t send_write_zeroes = 1u << 6;
inline constexpr std::uint16_t send_df = 1u << 7;
inline constexpr std::uint16_t can_multi_conn = 1u << 8;
inline constexpr std::uint16_t send_resize = 1u << 9;
inline constexpr std::uint16_t send_cache = 1u << 10;
inline constexpr std::uint16_t send_fast_zero = 1u << 11;
inline constexpr std::uint16_t block_status_payload = 1u << 12;
}  // namespace transmission_flag

// ---- Transmission ----

inline constexpr std::uint32_t request_magic = 0x25609513;
inline constexpr std::uint32_t simple_reply_magic = 0x67446698;
inline constexpr std::uint32_t structured_reply_magic = 0x668e33ef;

enum class Command : std::uint16_t {
  read = 0,
  write = 1,
  disc = 2,
  flush = 3,
  trim = 4,
  cache = 5,
  write_zeroes = 6,
  block_status = 7,
  resize = 8,
};

namespace command_flag {
inline constexpr std::uint16_t fua = 1u << 0;
inline constexpr std::uint16_t no_hole = 1u << 1;
inline constexpr std::uint16_t df = 1u << 2;
inline constexpr std::uint16_t req_one = 1u << 3;
inline constexpr std::uint16_t fast_zero = 1u << 4;
inline constexpr std::uint16_t payload_len = 1u << 5;  // extended headers only
}  // namespace command_flag

// Structured reply chunk types.
enum class ReplyType : std::uint16_t {
  none = 0,
  offset_data = 1,
  offset_hole = 2,
  block_status = 5,  // the nbd repository's nbd.h still says 3; the spec says 5
  block_status_ext = 6,  // extended headers only
  error = 0x8001,
  error_offset = 0x8002,
};

// Every error chunk type has bit 15 set, including ones this code has never heard of.
constexpr bool is_error(ReplyType type) {
  return (static_cast<std::uint16_t>(type) & 0x8000u) != 0;
}

namespace reply_flag {
inline constexpr std::uint16_t done = 1u << 0;
}  // namespace reply_flag

// Status bits of the base:allocation metadata context.
namespace allocation_state {
inline constexpr std::uint32_t hole = 1u << 0;  // unallocated
inline constexpr std::uint32_t zero = 1u << 1;  // reads as zeros
}  // namespace allocation_state

// Error numbers on the wire. They equal Linux errno values, but the spec defines them
// on its own, so they are mapped explicitly rather than cast.
enum class Errno : std::uint32_t {
  none = 0,
  eperm = 1,
  eio = 5,
  enomem = 12,
  einval = 22,
  enospc = 28,
  eoverflow = 75,
  enotsup = 95,
  eshutdown = 108,
};

// Names for messages: "GO", "NBD_REP_ERR_UNKNOWN", "READ", "OFFSET_DATA", "EIO";
// values this code does not know are shown as numbers ("option 42").
std::string to_string(Option option);
std::string to_string(OptionReplyType type);
std::string to_string(InfoType type);
std::string to_string(Command command);
std::string to_string(ReplyType type);
std::string to_string(Errno error);

// What an option error means, in words ("unknown export"), for the refusal messages.
std::string_view describe(OptionReplyType type);

// The local error for an NBD error number; the spec says to read unknown values as
// EINVAL.
std::error_code to_error_code(Errno error);
// The NBD error number a server sends for a local failure. Errors the protocol has no
// number for become EIO, except the ones the spec maps (EDQUOT and EFBIG to ENOSPC,
// EROFS to EPERM).
Errno to_nbd_errno(std::error_code code);

}  // namespace sluice::nbd
