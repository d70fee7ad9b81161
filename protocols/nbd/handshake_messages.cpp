#include "protocols/nbd/handshake_messages.hpp"

#include <cstdio>

#include "protocols/nbd/big_endian.hpp"
#include "protocols/nbd/wire_reader.hpp"
#include "protocols/nbd/wire_text.hpp"

namespace sluice::nbd {

namespace {

tl::unexpected<Error> malformed(std::string message) {
  return fail(std::errc::protocol_error, std::move(message));
}

std::string hex64(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", value);
  return text;
}

std::string size_mismatch(std::string_view what, std::size_t got, std::string_view expected) {
  return std::string(what) + " is " + std::to_string(got) + " bytes, expected " +
         std::string(expected);
}

// The spec's rule for every string: at most 4096 bytes and no NUL. `what` names it.
Status check_string(std::string_view what, std::string_view text) {
  if (text.size() > max_string_length)
    return fail(std::errc::invalid_argument, std::string(what) + " is " +
                                                 std::to_string(text.size()) +
                                                 " bytes, the NBD limit is 4096");
  if (text.find('\0') != std::string_view::npos)
    return fail(std::errc::invalid_argument, std::string(what) + " contains a NUL byte");
  return {};
}

// A received string, with the same rule; a violation is the peer's protocol error.
Result<std::string> received_string(std::string_view what, std::span<const std::byte> bytes) {
  std::string text = to_text(bytes);
  if (auto ok = check_string(what, text); !ok)
    return malformed(std::move(ok.error().message));
  return text;
}

std::vector<std::byte> with_header(std::span<const std::byte> header,
                                   std::span<const std::byte> payload) {
  std::vector<std::byte> out;
  out.reserve(header.size() + payload.size());
  append_bytes(out, header);
  append_bytes(out, payload);
  return out;
}

std::vector<std::byte> option_request(Option option, std::span<const std::byte> data) {
  return with_header(encode_option_header({option, static_cast<std::uint32_t>(data.size())}),
                     data);
}

std::vector<std::byte> info_reply(Option option, InfoType type,
                                  std::span<const std::byte> body) {
  std::vector<std::byte> payload;
  payload.reserve(2 + body.size());
  append_u16(payload, static_cast<std::uint16_t>(type));
  append_bytes(payload, body);
  return encode_option_reply(option, OptionReplyType::info, payload);
}

bool names_an_export(Option option) {
  switch (option) {
    case Option::export_name:
    case Option::info:
    case Option::go:
    case Option::list_meta_context:
    case Option::set_meta_context: return true;
    default: return false;
  }
}

std::error_code refusal_code(OptionReplyType type) {
  switch (type) {
    case OptionReplyType::err_unsup:
    case OptionReplyType::err_platform:
    case OptionReplyType::err_ext_header_reqd:
      return std::make_error_code(std::errc::not_supported);
    case OptionReplyType::err_policy:
    case OptionReplyType::err_tls_reqd:
      return std::make_error_code(std::errc::permission_denied);
    case OptionReplyType::err_invalid:
    case OptionReplyType::err_block_size_reqd:
      return std::make_error_code(std::errc::invalid_argument);
    case OptionReplyType::err_unknown:
      return std::make_error_code(std::errc::no_such_file_or_directory);
    case OptionReplyType::err_shutdown: return to_error_code(Errno::eshutdown);
    case OptionReplyType::err_too_big: return std::make_error_code(std::errc::value_too_large);
    default: return std::make_error_code(std::errc::protocol_error);
  }
}

}  // namespace

// ---- Greeting and client flags ----

std::array<std::byte, greeting_size> encode_greeting(std::uint16_t handshake_flags) {
  std::array<std::byte, greeting_size> out{};
  std::span<std::byte, greeting_size> s(out);
  store_u64(s.subspan<0, 8>(), nbd_magic);
  store_u64(s.subspan<8, 8>(), option_magic);
  store_u16(s.subspan<16, 2>(), handshake_flags);
  return out;
}

Result<std::uint16_t> decode_greeting(std::span<const std::byte> bytes) {
  if (bytes.size() != greeting_size)
    return malformed(size_mismatch("NBD greeting", bytes.size(), "18"));
  auto s = bytes.first<greeting_size>();
  const std::uint64_t magic = load_u64(s.subspan<0, 8>());
  if (magic != nbd_magic)
    return malformed("not an NBD server: greeting starts with " + hex64(magic) +
                     ", expected NBDMAGIC");
  const std::uint64_t second = load_u64(s.subspan<8, 8>());
  if (second == oldstyle_magic)
    return fail(std::errc::not_supported,
                "the NBD server uses oldstyle negotiation, which is not supported "
                "(it has no export names and no option haggling)");
  if (second != option_magic)
    return malformed("NBD greeting: second magic is " + hex64(second) + ", expected IHAVEOPT");
  return load_u16(s.subspan<16, 2>());
}

std::array<std::byte, client_flags_size> encode_client_flags(std::uint32_t client_flags) {
  std::array<std::byte, client_flags_size> out{};
  store_u32(out, client_flags);
  return out;
}

Result<std::uint32_t> decode_client_flags(std::span<const std::byte> bytes,
                                          std::uint16_t offered_handshake_flags) {
  if (bytes.size() != client_flags_size)
    return malformed(size_mismatch("NBD client flags", bytes.size(), "4"));
  const std::uint32_t flags = load_u32(bytes.first<client_flags_size>());
  if (flags & ~client_flag::known)
    return malformed("NBD client flags " + hex(flags) + " include unknown flags " +
                     hex(flags & ~client_flag::known));
  if ((flags & client_flag::no_zeroes) && !(offered_handshake_flags & handshake_flag::no_zeroes))
    return malformed("NBD client set NO_ZEROES, which the server did not offer");
  if ((flags & client_flag::fixed_newstyle) &&
      !(offered_handshake_flags & handshake_flag::fixed_newstyle))
    return malformed("NBD client set FIXED_NEWSTYLE, which the server did not offer");
  return flags;
}

// ---- Option requests ----

std::array<std::byte, option_header_size> encode_option_header(const OptionHeader& header) {
  std::array<std::byte, option_header_size> out{};
  std::span<std::byte, option_header_size> s(out);
  store_u64(s.subspan<0, 8>(), option_magic);
  store_u32(s.subspan<8, 4>(), static_cast<std::uint32_t>(header.option));
  store_u32(s.subspan<12, 4>(), header.length);
  return out;
}

Result<OptionHeader> decode_option_header(std::span<const std::byte> bytes) {
  if (bytes.size() != option_header_size)
    return malformed(size_mismatch("NBD option header", bytes.size(), "16"));
  auto s = bytes.first<option_header_size>();
  const std::uint64_t magic = load_u64(s.subspan<0, 8>());
  if (magic != option_magic)
    return malformed("NBD option: magic is " + hex64(magic) + ", expected IHAVEOPT");
  OptionHeader header{static_cast<Option>(load_u32(s.subspan<8, 4>())),
                      load_u32(s.subspan<12, 4>())};
  if (header.length > max_option_length)
    return malformed("NBD " + to_string(header.option) + " carries " +
                     std::to_string(header.length) + " bytes of data, the limit is " +
                     std::to_string(max_option_length));
  return header;
}

std::vector<std::byte> encode_option(Option option) { return option_request(option, {}); }

Result<std::vector<std::byte>> encode_export_name_option(std::string_view export_name) {
  if (auto ok = check_string("export name", export_name); !ok) return tl::unexpected(ok.error());
  return option_request(Option::export_name, text_bytes(export_name));
}

Result<std::vector<std::byte>> encode_info_option(Option info_or_go, std::string_view export_name,
                                                  std::span<const InfoType> requests) {
  if (auto ok = check_string("export name", export_name); !ok) return tl::unexpected(ok.error());
  if (4 + export_name.size() + 2 + 2 * requests.size() > max_option_length)
    return fail(std::errc::invalid_argument,
                "NBD " + to_string(info_or_go) + " request with " +
                    std::to_string(requests.size()) + " information requests is too large");
  std::vector<std::byte> data;
  data.reserve(4 + export_name.size() + 2 + 2 * requests.size());
  append_u32(data, static_cast<std::uint32_t>(export_name.size()));
  append_bytes(data, text_bytes(export_name));
  append_u16(data, static_cast<std::uint16_t>(requests.size()));
  for (InfoType type : requests) append_u16(data, static_cast<std::uint16_t>(type));
  return option_request(info_or_go, data);
}

Result<std::vector<std::byte>> encode_meta_context_option(Option list_or_set,
                                                          std::string_view export_name,
                                                          std::span<const std::string> queries) {
  if (auto ok = check_string("export name", export_name); !ok) return tl::unexpected(ok.error());
  std::vector<std::byte> data;
  append_u32(data, static_cast<std::uint32_t>(export_name.size()));
  append_bytes(data, text_bytes(export_name));
  append_u32(data, static_cast<std::uint32_t>(queries.size()));
  for (const std::string& query : queries) {
    if (auto ok = check_string("metadata context query", query); !ok)
      return tl::unexpected(ok.error());
    append_u32(data, static_cast<std::uint32_t>(query.size()));
    append_bytes(data, text_bytes(query));
  }
  if (data.size() > max_option_length)
    return fail(std::errc::invalid_argument,
                "NBD " + to_string(list_or_set) + " request would be " +
                    std::to_string(data.size()) + " bytes, the limit is " +
                    std::to_string(max_option_length));
  return option_request(list_or_set, data);
}

Status check_no_option_data(const OptionHeader& header) {
  if (header.length != 0)
    return malformed("NBD " + to_string(header.option) + " carries " +
                     std::to_string(header.length) + " bytes of data, expected none");
  return {};
}

Result<std::string> decode_export_name_option(std::span<const std::byte> data) {
  return received_string("NBD option EXPORT_NAME: export name", data);
}

Result<InfoRequest> decode_info_option(std::span<const std::byte> data) {
  const std::string what = "NBD option INFO/GO";
  WireReader in(data);
  auto name_length = in.u32();
  if (!name_length)
    return malformed(what + ": data is " + std::to_string(data.size()) +
                     " bytes, too short for the name length");
  auto name_bytes = in.take(*name_length);
  if (!name_bytes)
    return malformed(what + ": export name length " + std::to_string(*name_length) +
                     " exceeds the " + std::to_string(data.size() - 4) + " bytes that follow");
  InfoRequest request;
  auto name = received_string(what + ": export name", *name_bytes);
  if (!name) return tl::unexpected(name.error());
  request.export_name = std::move(*name);
  auto count = in.u16();
  if (!count) return malformed(what + ": data ends before the information request count");
  if (in.remaining() != 2u * *count)
    return malformed(what + ": " + std::to_string(*count) + " information requests need " +
                     std::to_string(2u * *count) + " bytes, " + std::to_string(in.remaining()) +
                     " follow");
  request.requests.reserve(*count);
  for (std::uint32_t i = 0; i < *count; ++i)
    request.requests.push_back(static_cast<InfoType>(*in.u16()));
  return request;
}

Result<MetaContextRequest> decode_meta_context_option(std::span<const std::byte> data) {
  const std::string what = "NBD option LIST/SET_META_CONTEXT";
  WireReader in(data);
  auto name_length = in.u32();
  if (!name_length)
    return malformed(what + ": data is " + std::to_string(data.size()) +
                     " bytes, too short for the name length");
  auto name_bytes = in.take(*name_length);
  if (!name_bytes)
    return malformed(what + ": export name length " + std::to_string(*name_length) +
                     " exceeds the " + std::to_string(data.size() - 4) + " bytes that follow");
  MetaContextRequest request;
  auto name = received_string(what + ": export name", *name_bytes);
  if (!name) return tl::unexpected(name.error());
  request.export_name = std::move(*name);
  auto count = in.u32();
  if (!count) return malformed(what + ": data ends before the query count");
  // Each query takes at least its 4-byte length: a count beyond that is a lie, caught
  // before anything is reserved for it.
  if (*count > in.remaining() / 4)
    return malformed(what + ": " + std::to_string(*count) + " queries cannot fit in the " +
                     std::to_string(in.remaining()) + " bytes that follow");
  request.queries.reserve(*count);
  for (std::uint32_t i = 0; i < *count; ++i) {
    auto length = in.u32();
    if (!length) return malformed(what + ": data ends inside query " + std::to_string(i));
    auto bytes = in.take(*length);
    if (!bytes)
      return malformed(what + ": query " + std::to_string(i) + " is " + std::to_string(*length) +
                       " bytes, only " + std::to_string(in.remaining()) + " follow");
    auto query = received_string(what + ": query", *bytes);
    if (!query) return tl::unexpected(query.error());
    request.queries.push_back(std::move(*query));
  }
  if (!in.empty())
    return malformed(what + ": " + std::to_string(in.remaining()) +
                     " bytes left over after the last query");
  return request;
}

// ---- Option replies ----

std::array<std::byte, option_reply_header_size> encode_option_reply_header(
    const OptionReplyHeader& header) {
  std::array<std::byte, option_reply_header_size> out{};
  std::span<std::byte, option_reply_header_size> s(out);
  store_u64(s.subspan<0, 8>(), option_reply_magic);
  store_u32(s.subspan<8, 4>(), static_cast<std::uint32_t>(header.option));
  store_u32(s.subspan<12, 4>(), static_cast<std::uint32_t>(header.type));
  store_u32(s.subspan<16, 4>(), header.length);
  return out;
}

Result<OptionReplyHeader> decode_option_reply_header(std::span<const std::byte> bytes,
                                                     Option expected) {
  if (bytes.size() != option_reply_header_size)
    return malformed(size_mismatch("NBD option reply header", bytes.size(), "20"));
  auto s = bytes.first<option_reply_header_size>();
  const std::uint64_t magic = load_u64(s.subspan<0, 8>());
  if (magic != option_reply_magic)
    return malformed("NBD option reply: magic is " + hex64(magic) + ", expected " +
                     hex64(option_reply_magic));
  OptionReplyHeader header{static_cast<Option>(load_u32(s.subspan<8, 4>())),
                           static_cast<OptionReplyType>(load_u32(s.subspan<12, 4>())),
                           load_u32(s.subspan<16, 4>())};
  if (header.option != expected)
    return malformed("NBD option reply is for " + to_string(header.option) + " while " +
                     to_string(expected) + " was sent");
  if (header.type == OptionReplyType::ack && header.length != 0)
    return malformed("NBD option reply: ACK to " + to_string(expected) + " carries " +
                     std::to_string(header.length) + " bytes, expected none");
  if (header.length > max_option_length)
    return malformed("NBD option reply: " + to_string(header.type) + " to " +
                     to_string(expected) + " is " + std::to_string(header.length) +
                     " bytes, the limit is " + std::to_string(max_option_length));
  return header;
}

std::vector<std::byte> encode_option_reply(Option option, OptionReplyType type,
                                           std::span<const std::byte> payload) {
  return with_header(
      encode_option_reply_header({option, type, static_cast<std::uint32_t>(payload.size())}),
      payload);
}

std::vector<std::byte> encode_ack(Option option) {
  return encode_option_reply(option, OptionReplyType::ack, {});
}

Result<std::vector<std::byte>> encode_server_reply(std::string_view export_name,
                                                   std::string_view description) {
  if (auto ok = check_string("export name", export_name); !ok) return tl::unexpected(ok.error());
  if (auto ok = check_string("export description", description); !ok)
    return tl::unexpected(ok.error());
  std::vector<std::byte> payload;
  append_u32(payload, static_cast<std::uint32_t>(export_name.size()));
  append_bytes(payload, text_bytes(export_name));
  append_bytes(payload, text_bytes(description));
  return encode_option_reply(Option::list, OptionReplyType::server, payload);
}

std::vector<std::byte> encode_info_export(Option info_or_go, std::uint64_t size,
                                          std::uint16_t transmission_flags) {
  std::vector<std::byte> body;
  append_u64(body, size);
  append_u16(body, transmission_flags);
  return info_reply(info_or_go, InfoType::export_info, body);
}

Result<std::vector<std::byte>> encode_info_name(Option info_or_go, std::string_view name) {
  if (auto ok = check_string("export name", name); !ok) return tl::unexpected(ok.error());
  return info_reply(info_or_go, InfoType::name, text_bytes(name));
}

Result<std::vector<std::byte>> encode_info_description(Option info_or_go,
                                                       std::string_view description) {
  if (auto ok = check_string("export description", description); !ok)
    return tl::unexpected(ok.error());
  return info_reply(info_or_go, InfoType::description, text_bytes(description));
}

std::vector<std::byte> encode_info_block_size(Option info_or_go, const BlockSizes& sizes) {
  std::vector<std::byte> body;
  append_u32(body, sizes.minimum);
  append_u32(body, sizes.preferred);
  append_u32(body, sizes.maximum);
  return info_reply(info_or_go, InfoType::block_size, body);
}

Result<std::vector<std::byte>> encode_meta_context_reply(Option list_or_set,
                                                         std::uint32_t context_id,
                                                         std::string_view name) {
  if (auto ok = check_string("metadata context name", name); !ok)
    return tl::unexpected(ok.error());
  std::vector<std::byte> payload;
  append_u32(payload, context_id);
  append_bytes(payload, text_bytes(name));
  return encode_option_reply(list_or_set, OptionReplyType::meta_context, payload);
}

std::vector<std::byte> encode_error_reply(Option option, OptionReplyType error,
                                          std::string_view message) {
  return encode_option_reply(option, error, text_bytes(cut_utf8(message, max_string_length)));
}

Result<ExportListing> decode_server_reply(std::span<const std::byte> payload) {
  WireReader in(payload);
  auto name_length = in.u32();
  if (!name_length)
    return malformed("NBD option reply: SERVER payload is " + std::to_string(payload.size()) +
                     " bytes, too short for the name length");
  auto name_bytes = in.take(*name_length);
  if (!name_bytes)
    return malformed("NBD option reply: SERVER name length " + std::to_string(*name_length) +
                     " exceeds the " + std::to_string(payload.size() - 4) +
                     " bytes that follow");
  ExportListing listing;
  auto name = received_string("NBD option reply: SERVER export name", *name_bytes);
  if (!name) return tl::unexpected(name.error());
  listing.name = std::move(*name);
  auto description = received_string("NBD option reply: SERVER description", in.take_rest());
  if (!description) return tl::unexpected(description.error());
  listing.description = std::move(*description);
  return listing;
}

Result<InfoReply> decode_info_reply(std::span<const std::byte> payload) {
  WireReader in(payload);
  auto raw_type = in.u16();
  if (!raw_type)
    return malformed("NBD option reply: INFO payload is " + std::to_string(payload.size()) +
                     " bytes, too short for the information type");
  const auto type = static_cast<InfoType>(*raw_type);
  auto exact = [&](std::size_t expected) -> Status {
    if (payload.size() != expected)
      return malformed("NBD option reply: " + to_string(type) + " payload is " +
                       std::to_string(payload.size()) + " bytes, expected " +
                       std::to_string(expected));
    return {};
  };
  switch (type) {
    case InfoType::export_info: {
      if (auto ok = exact(12); !ok) return tl::unexpected(ok.error());
      ExportInfo info;
      info.size = *in.u64();
      info.transmission_flags = *in.u16();
      return info;
    }
    case InfoType::name: {
      auto name = received_string("NBD option reply: INFO_NAME", in.take_rest());
      if (!name) return tl::unexpected(name.error());
      return ExportName{std::move(*name)};
    }
    case InfoType::description: {
      auto text = received_string("NBD option reply: INFO_DESCRIPTION", in.take_rest());
      if (!text) return tl::unexpected(text.error());
      return ExportDescription{std::move(*text)};
    }
    case InfoType::block_size: {
      if (auto ok = exact(14); !ok) return tl::unexpected(ok.error());
      BlockSizes sizes;
      sizes.minimum = *in.u32();
      sizes.preferred = *in.u32();
      sizes.maximum = *in.u32();
      return sizes;
    }
  }
  return UnknownInfo{type};
}

Result<MetaContext> decode_meta_context_reply(std::span<const std::byte> payload) {
  WireReader in(payload);
  auto id = in.u32();
  if (!id)
    return malformed("NBD option reply: META_CONTEXT payload is " +
                     std::to_string(payload.size()) + " bytes, too short for the context id");
  auto name = received_string("NBD option reply: META_CONTEXT name", in.take_rest());
  if (!name) return tl::unexpected(name.error());
  if (name->empty()) return malformed("NBD option reply: META_CONTEXT has an empty name");
  return MetaContext{*id, std::move(*name)};
}

Error option_error(Option option, OptionReplyType type, std::span<const std::byte> message,
                   std::optional<std::string_view> export_name) {
  std::string text = "server refused " + to_string(option);
  if (export_name && names_an_export(option))
    text += " for export '" + printable(*export_name, max_string_length) + "'";
  text += ": ";
  text += describe(type);
  text += " (" + to_string(type) + ")";
  if (!message.empty()) text += ": " + printable(to_text(message), max_string_length);
  return Error{refusal_code(type), std::move(text)};
}

// ---- Oldstyle ----

bool is_oldstyle_greeting(std::span<const std::byte> first_16_bytes) {
  if (first_16_bytes.size() != oldstyle_prefix_size) return false;
  auto s = first_16_bytes.first<oldstyle_prefix_size>();
  return load_u64(s.subspan<0, 8>()) == nbd_magic && load_u64(s.subspan<8, 8>()) == oldstyle_magic;
}

Result<ExportInfo> decode_oldstyle_body(std::span<const std::byte> bytes) {
  if (bytes.size() != oldstyle_body_size)
    return malformed(size_mismatch("NBD oldstyle export description", bytes.size(), "136"));
  auto s = bytes.first<12>();
  return ExportInfo{load_u64(s.subspan<0, 8>()), static_cast<std::uint16_t>(load_u32(s.subspan<8, 4>()) & 0xffff)};
}

// ---- EXPORT_NAME success reply ----

std::vector<std::byte> encode_export_name_reply(const ExportInfo& info, bool no_zeroes) {
  std::vector<std::byte> out;
  out.reserve(export_name_reply_size + export_name_reply_padding);
  append_u64(out, info.size);
  append_u16(out, info.transmission_flags);
  if (!no_zeroes) out.resize(export_name_reply_size + export_name_reply_padding);
  return out;
}

Result<ExportInfo> decode_export_name_reply(std::span<const std::byte> bytes) {
  if (bytes.size() != export_name_reply_size &&
      bytes.size() != export_name_reply_size + export_name_reply_padding)
    return malformed(size_mismatch("NBD EXPORT_NAME reply", bytes.size(), "10 or 134"));
  auto s = bytes.first<export_name_reply_size>();
  return ExportInfo{load_u64(s.subspan<0, 8>()), load_u16(s.subspan<8, 2>())};
}

}  // namespace sluice::nbd
