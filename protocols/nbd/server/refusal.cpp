#include "protocols/nbd/server/refusal.hpp"

#include <array>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"

namespace sluice::nbd {

namespace {

// More options than any client sends before GO: a client that keeps sending them
// after the refusal is not listening.
constexpr int max_options = 16;

}  // namespace

awaitable<void> refuse_client(Stream& stream, std::string_view reason) {
  const std::uint16_t offered = handshake_flag::fixed_newstyle | handshake_flag::no_zeroes;
  const auto greeting = encode_greeting(offered);
  if (!co_await stream.send(Frame{{}, greeting})) co_return;
  std::array<std::byte, client_flags_size> client_flags{};
  if (!co_await stream.read_exactly(client_flags)) co_return;
  if (!decode_client_flags(client_flags, offered)) co_return;
  std::vector<std::byte> data;
  for (int i = 0; i < max_options; ++i) {
    std::array<std::byte, option_header_size> bytes{};
    if (!co_await stream.read_exactly(bytes)) co_return;
    auto header = decode_option_header(bytes);  // bounds the data's length
    if (!header) co_return;
    data.resize(header->length);
    if (!co_await stream.read_exactly(data)) co_return;
    if (header->option == Option::export_name) co_return;
    const bool abort = header->option == Option::abort;
    const std::vector<std::byte> reply = abort ? encode_ack(header->option)
                                               : encode_error_reply(header->option, OptionReplyType::err_policy, reason);
    if (!co_await stream.send(Frame{{}, reply}) || abort) co_return;
  }
}

}  // namespace sluice::nbd
