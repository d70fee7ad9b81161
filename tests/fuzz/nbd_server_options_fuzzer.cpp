// libFuzzer target: what an NBD client sends during the handshake, decoded as the
// server does (protocols/nbd/server/handshake.cpp): the client flags, then options,
// each a header that bounds the data read after it. Data that decodes must encode
// back to the very bytes, so no two requests read alike.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using namespace sluice::nbd;
using sluice::fuzz::accepted;

namespace {

// What the client sent for this option, header and data, as encode_* would write it.
bool same_bytes(const Result<std::vector<std::byte>>& encoded, std::span<const std::byte> head,
                std::span<const std::byte> data) {
  if (!encoded || encoded->size() != head.size() + data.size()) return false;
  return std::equal(head.begin(), head.end(), encoded->begin()) &&
         std::equal(data.begin(), data.end(), encoded->begin() + static_cast<std::ptrdiff_t>(head.size()));
}

void decode_option_data(const OptionHeader& header, std::span<const std::byte> head, std::span<const std::byte> data) {
  switch (header.option) {
    case Option::export_name: {
      auto name = decode_export_name_option(data);
      if (accepted(name)) FUZZ_REQUIRE(same_bytes(encode_export_name_option(*name), head, data));
      break;
    }
    case Option::info:
    case Option::go: {
      auto request = decode_info_option(data);
      if (accepted(request))
        FUZZ_REQUIRE(same_bytes(encode_info_option(header.option, request->export_name, request->requests), head, data));
      else
        (void)encode_error_reply(header.option, OptionReplyType::err_invalid, request.error().message);
      break;
    }
    case Option::list_meta_context:
    case Option::set_meta_context: {
      auto request = decode_meta_context_option(data);
      if (accepted(request))
        FUZZ_REQUIRE(
            same_bytes(encode_meta_context_option(header.option, request->export_name, request->queries), head, data));
      break;
    }
    default: {
      const bool empty = check_no_option_data(header).has_value();
      FUZZ_REQUIRE(empty == data.empty());
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::WireInput in(data, size);
  const std::uint16_t offered = handshake_flag::fixed_newstyle | handshake_flag::no_zeroes;
  if (!accepted(decode_client_flags(in.take(client_flags_size), offered))) return 0;
  while (true) {
    auto head = in.take(option_header_size);
    auto header = decode_option_header(head);
    if (!accepted(header)) return 0;
    FUZZ_REQUIRE(header->length <= max_option_length);
    auto option_data = in.take_exactly(header->length);
    if (!option_data) return 0;
    decode_option_data(*header, head, *option_data);
  }
}
