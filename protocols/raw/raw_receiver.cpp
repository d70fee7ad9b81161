#include "protocols/raw/raw_receiver.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "protocols/common/tls_sniff.hpp"
#include "protocols/common/trailing_bytes.hpp"

namespace sluice {

awaitable<Result<ReceiveResult>> receive_raw(StreamReader& reader, Destination& destination,
                                             const ReceiveOptions& options) {
  // Raw bytes have no header to check, so a TLS client sent here by mistake would have
  // its hello written over the start of the disk: look at the first bytes without
  // taking them (a zero-copy receive then still splices from the stream's start).
  if (!reader.stream().is_tls() && reader.buffered() == 0 && options.image_size >= 9) {
    std::array<std::byte, 9> first{};
    auto n = co_await reader.stream().peek_some(first);
    if (!n) co_return tl::unexpected(n.error());
    if (starts_with_tls_client_hello(std::span(first).first(*n)))
      co_return fail(std::errc::protocol_error, tls_on_plaintext_listener("tcp://") + "; nothing was written");
  }
  ReceiveWriter writer(co_await asio::this_coro::executor, destination, options, reader);
  const std::uint64_t size = options.image_size;
  std::uint64_t offset = 0;
  Status outcome;  // fails when the stream broke, ended early or carried too much
  while (offset < size) {
    const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(size - offset, options.piece));
    auto n = co_await writer.receive(offset, wanted);
    if (!n) {
      outcome = tl::unexpected(Error{n.error().code, "at offset " + std::to_string(offset) + ": " +
                                                          n.error().message});
      break;
    }
    offset += *n;
    if (*n < wanted) {
      outcome = fail(std::errc::connection_reset, "the raw stream ended after " + std::to_string(offset) +
                                                       " of " + std::to_string(size) + " bytes");
      break;
    }
  }
  if (outcome) {
    // The whole image arrived. More bytes behind it mean the sender's image is larger,
    // and keeping its first `size` bytes would be a silently truncated disk.
    auto more = co_await bytes_follow(reader, options.trailing_grace);
    if (more && *more > 0)
      outcome = fail(std::errc::file_too_large,
                     "the raw stream carries more than the image's " + std::to_string(size) +
                         " bytes (--size): at least " + std::to_string(*more) +
                         " more arrived, so the sender's image is larger; its first " + std::to_string(size) +
                         " bytes were written, nothing is flushed or reported as done");
  }
  Status written = co_await writer.drain();
  if (!written) co_return tl::unexpected(written.error());
  if (!outcome) co_return tl::unexpected(outcome.error());
  co_return co_await writer.finish(offset);
}

}  // namespace sluice
