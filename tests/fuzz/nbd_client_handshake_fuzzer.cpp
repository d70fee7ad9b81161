// libFuzzer target: what an NBD server sends during the handshake, decoded as the
// client does (protocols/nbd/client/handshake.cpp): the greeting or an oldstyle one,
// then option replies (a header that bounds the payload read after it), then the
// EXPORT_NAME reply with whatever is left.
#include <cstddef>
#include <cstdint>
#include <variant>

#include "protocols/nbd/block_size_rules.hpp"
#include "protocols/nbd/handshake_messages.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using namespace sluice::nbd;
using sluice::fuzz::accepted;

namespace {

void decode_reply_payload(Option option, const OptionReplyHeader& header, std::span<const std::byte> payload) {
  if (is_error(header.type)) {
    const Error error = option_error(option, header.type, payload, "disk");
    FUZZ_REQUIRE(!error.message.empty());
    return;
  }
  switch (header.type) {
    case OptionReplyType::server: {
      auto listing = decode_server_reply(payload);
      if (accepted(listing)) FUZZ_REQUIRE(listing->name.size() + listing->description.size() + 4 == payload.size());
      break;
    }
    case OptionReplyType::info: {
      auto info = decode_info_reply(payload);
      if (accepted(info))
        if (const auto* sizes = std::get_if<BlockSizes>(&*info)) (void)accepted(validate_block_sizes(*sizes));
      break;
    }
    case OptionReplyType::meta_context: {
      auto context = decode_meta_context_reply(payload);
      if (accepted(context)) FUZZ_REQUIRE(context->name.size() + 4 == payload.size());
      break;
    }
    default: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::WireInput in(data, size);
  std::array<std::byte, greeting_size> greeting{};
  auto first = in.take(oldstyle_prefix_size);
  if (is_oldstyle_greeting(first)) {
    auto info = decode_oldstyle_body(in.take(oldstyle_body_size));
    (void)accepted(info);
    return 0;
  }
  std::copy(first.begin(), first.end(), greeting.begin());
  auto rest = in.take(greeting_size - oldstyle_prefix_size);
  std::copy(rest.begin(), rest.end(), greeting.begin() + oldstyle_prefix_size);
  if (!accepted(decode_greeting(std::span(greeting).first(first.size() + rest.size())))) return 0;

  // Option replies until the input runs short of a header. The client knows which
  // option it sent; here the reply's own echo stands in for it, and a second decode
  // against GO checks the mismatch path.
  while (true) {
    auto head = in.take(option_reply_header_size);
    if (head.size() < option_reply_header_size) {
      (void)accepted(decode_export_name_reply(head));
      return 0;
    }
    const auto sent = static_cast<Option>(std::to_integer<std::uint32_t>(head[8]) << 24 |
                                          std::to_integer<std::uint32_t>(head[9]) << 16 |
                                          std::to_integer<std::uint32_t>(head[10]) << 8 |
                                          std::to_integer<std::uint32_t>(head[11]));
    (void)accepted(decode_option_reply_header(head, Option::go));
    auto header = decode_option_reply_header(head, sent);
    if (!accepted(header)) {
      // Not an option reply: what the client would read instead is the EXPORT_NAME
      // reply (10 bytes, or 134 with the padding).
      std::array<std::byte, export_name_reply_size + export_name_reply_padding> reply{};
      std::copy(head.begin(), head.end(), reply.begin());
      auto more = in.take(reply.size() - head.size());
      std::copy(more.begin(), more.end(), reply.begin() + static_cast<std::ptrdiff_t>(head.size()));
      (void)accepted(decode_export_name_reply(std::span(reply).first(head.size() + more.size())));
      return 0;
    }
    FUZZ_REQUIRE(header->length <= max_option_length);
    FUZZ_REQUIRE(header->option == sent);
    auto payload = in.take_exactly(header->length);
    if (!payload) return 0;
    decode_reply_payload(sent, *header, *payload);
  }
}
