// NBD handshake messages (fixed newstyle), both directions, as pure functions.
//
// The shape every peer follows: read a fixed-size header into a small array, decode it
// (which bounds the length that follows), read that many payload bytes, decode the
// payload. Decoders check every length against what the message type requires and
// return an Error naming the message and the numbers; they never read past the span
// they are given. Strings follow the spec: at most 4096 bytes, no NUL.
//
// Whole messages are encoded into vectors: the handshake happens once per connection,
// so its allocations do not matter.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/block_sizes.hpp"
#include "engine/error.hpp"
#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

// ---- Greeting and client flags ----

// NBDMAGIC, IHAVEOPT, 16 bits of handshake flags.
inline constexpr std::size_t greeting_size = 18;

std::array<std::byte, greeting_size> encode_greeting(std::uint16_t handshake_flags);
// Client side: the handshake flags. Refuses oldstyle servers (by name) and anything
// that is not NBD.
Result<std::uint16_t> decode_greeting(std::span<const std::byte> bytes);

inline constexpr std::size_t client_flags_size = 4;

std::array<std::byte, client_flags_size> encode_client_flags(std::uint32_t client_flags);
// Server side: the client's flags. Unknown flags, and flags the server did not offer,
// are refused: the spec then requires the server to drop the connection.
Result<std::uint32_t> decode_client_flags(std::span<const std::byte> bytes,
                                          std::uint16_t offered_handshake_flags);

// ---- Option requests (client to server) ----

// IHAVEOPT, 32 bits option, 32 bits data length.
inline constexpr std::size_t option_header_size = 16;
// Largest option data or option reply payload accepted. The largest legitimate ones
// (a LIST entry with name and description, a SET_META_CONTEXT with a few queries) are
// a few KiB; the bound keeps a hostile peer from making us allocate gigabytes.
inline constexpr std::uint32_t max_option_length = 64 * 1024;

struct OptionHeader {
  Option option = Option::abort;
  std::uint32_t length = 0;  // of the data that follows
  friend bool operator==(const OptionHeader&, const OptionHeader&) = default;
};

std::array<std::byte, option_header_size> encode_option_header(const OptionHeader& header);
// Server side: checks the magic and bounds the length by max_option_length.
Result<OptionHeader> decode_option_header(std::span<const std::byte> bytes);

// Whole option requests, header and data.
// Options without data: ABORT, LIST, STARTTLS, STRUCTURED_REPLY.
std::vector<std::byte> encode_option(Option option);
Result<std::vector<std::byte>> encode_export_name_option(std::string_view export_name);
// INFO or GO: the export and the information items asked for.
Result<std::vector<std::byte>> encode_info_option(Option info_or_go, std::string_view export_name,
                                                  std::span<const InfoType> requests);
// LIST_META_CONTEXT or SET_META_CONTEXT: the export and the queries
// (e.g. "base:allocation").
Result<std::vector<std::byte>> encode_meta_context_option(Option list_or_set,
                                                          std::string_view export_name,
                                                          std::span<const std::string> queries);

// Server side payload decoders; an error here is answered with NBD_REP_ERR_INVALID.
Status check_no_option_data(const OptionHeader& header);
Result<std::string> decode_export_name_option(std::span<const std::byte> data);

struct InfoRequest {
  std::string export_name;
  std::vector<InfoType> requests;
  friend bool operator==(const InfoRequest&, const InfoRequest&) = default;
};
Result<InfoRequest> decode_info_option(std::span<const std::byte> data);

struct MetaContextRequest {
  std::string export_name;
  std::vector<std::string> queries;
  friend bool operator==(const MetaContextRequest&, const MetaContextRequest&) = default;
};
Result<MetaContextRequest> decode_meta_context_option(std::span<const std::byte> data);

// ---- Option replies (server to client) ----

// Reply magic, 32 bits option echoed, 32 bits reply type, 32 bits length.
inline constexpr std::size_t option_reply_header_size = 20;

struct OptionReplyHeader {
  Option option = Option::abort;
  OptionReplyType type = OptionReplyType::ack;
  std::uint32_t length = 0;
  friend bool operator==(const OptionReplyHeader&, const OptionReplyHeader&) = default;
};

std::array<std::byte, option_reply_header_size> encode_option_reply_header(
    const OptionReplyHeader& header);
// Client side: checks the magic, that the reply is for the option in flight
// (`expected`), that ACK carries nothing, and bounds the length by max_option_length.
Result<OptionReplyHeader> decode_option_reply_header(std::span<const std::byte> bytes,
                                                     Option expected);

// Whole replies, header and payload.
std::vector<std::byte> encode_option_reply(Option option, OptionReplyType type,
                                           std::span<const std::byte> payload);
std::vector<std::byte> encode_ack(Option option);
// NBD_REP_SERVER, one per export in answer to LIST.
Result<std::vector<std::byte>> encode_server_reply(std::string_view export_name,
                                                   std::string_view description = {});
std::vector<std::byte> encode_info_export(Option info_or_go, std::uint64_t size,
                                          std::uint16_t transmission_flags);
Result<std::vector<std::byte>> encode_info_name(Option info_or_go, std::string_view name);
Result<std::vector<std::byte>> encode_info_description(Option info_or_go,
                                                       std::string_view description);
std::vector<std::byte> encode_info_block_size(Option info_or_go, const BlockSizes& sizes);
Result<std::vector<std::byte>> encode_meta_context_reply(Option list_or_set,
                                                         std::uint32_t context_id,
                                                         std::string_view name);
// An error reply. A message longer than the protocol allows is cut at a character
// boundary rather than refused: it is only text for a person.
std::vector<std::byte> encode_error_reply(Option option, OptionReplyType error,
                                          std::string_view message = {});

// Client side payload decoders.
struct ExportListing {  // NBD_REP_SERVER
  std::string name;
  std::string description;
  friend bool operator==(const ExportListing&, const ExportListing&) = default;
};
Result<ExportListing> decode_server_reply(std::span<const std::byte> payload);

struct ExportInfo {  // NBD_INFO_EXPORT, or the EXPORT_NAME success reply
  std::uint64_t size = 0;
  std::uint16_t transmission_flags = 0;
  friend bool operator==(const ExportInfo&, const ExportInfo&) = default;
};
struct ExportName {
  std::string name;
  friend bool operator==(const ExportName&, const ExportName&) = default;
};
struct ExportDescription {
  std::string description;
  friend bool operator==(const ExportDescription&, const ExportDescription&) = default;
};
// An information type this code does not know: the spec says to ignore it.
struct UnknownInfo {
  InfoType type = InfoType::export_info;
  friend bool operator==(const UnknownInfo&, const UnknownInfo&) = default;
};
using InfoReply = std::variant<ExportInfo, ExportName, ExportDescription, BlockSizes, UnknownInfo>;
// NBD_REP_INFO. Block sizes are decoded as sent; validate_block_sizes() judges them.
Result<InfoReply> decode_info_reply(std::span<const std::byte> payload);

struct MetaContext {  // NBD_REP_META_CONTEXT
  std::uint32_t id = 0;
  std::string name;
  friend bool operator==(const MetaContext&, const MetaContext&) = default;
};
Result<MetaContext> decode_meta_context_reply(std::span<const std::byte> payload);

// The Error for an option error reply, in words a person can act on:
// "server refused GO for export 'x': unknown export (NBD_REP_ERR_UNKNOWN): <message>".
// `message` is the reply's payload, the server's own text (control characters are
// replaced, an overlong one is cut). The error code follows the refusal (ENOENT for an
// unknown export, ENOTSUP for an unsupported option, EACCES for policy and TLS).
Error option_error(Option option, OptionReplyType type, std::span<const std::byte> message,
                   std::optional<std::string_view> export_name = std::nullopt);

// ---- Oldstyle (the server speaks first and only) ----

// After NBDMAGIC and the oldstyle magic: 64 bits size, 32 bits flags (the transmission
// flags in the low 16), 124 zero bytes. No options, one unnamed export, no TLS.
inline constexpr std::size_t oldstyle_prefix_size = 16;  // NBDMAGIC, oldstyle magic
inline constexpr std::size_t oldstyle_body_size = 136;
// True when the 16 bytes a server sent first are NBDMAGIC and the oldstyle magic.
bool is_oldstyle_greeting(std::span<const std::byte> first_16_bytes);
// The padding is not checked (some servers put junk there).
Result<ExportInfo> decode_oldstyle_body(std::span<const std::byte> bytes);

// ---- EXPORT_NAME success reply ----

// 64 bits size, 16 bits transmission flags; then 124 zero bytes unless both sides
// agreed on NO_ZEROES.
inline constexpr std::size_t export_name_reply_size = 10;
inline constexpr std::size_t export_name_reply_padding = 124;

std::vector<std::byte> encode_export_name_reply(const ExportInfo& info, bool no_zeroes);
// Takes the first 10 bytes, or all 134 (the padding is reserved and not checked).
Result<ExportInfo> decode_export_name_reply(std::span<const std::byte> bytes);

}  // namespace sluice::nbd
