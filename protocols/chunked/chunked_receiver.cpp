#include "protocols/chunked/chunked_receiver.hpp"

#include <array>
#include <string>

#include "protocols/chunked/chunk_header.hpp"
#include "protocols/common/tls_sniff.hpp"
#include "protocols/common/trailing_bytes.hpp"

namespace sluice {

namespace {

tl::unexpected<Error> stream_error(std::errc code, const std::string& message) { return fail(code, message); }

// Receives one chunk's payload and starts its write; returns the bytes that arrived.
awaitable<Result<std::size_t>> receive_payload(StreamReader& reader, ReceiveWriter& writer, const ChunkHeader& header,
                                               std::uint64_t image_size) {
  if (header.offset + header.length <= image_size) co_return co_await writer.receive(header.offset, header.length);
  // A chunk may run into the padding of the image's last, partial sector; only the
  // part inside the image is written.
  auto buffer = co_await writer.acquire();
  if (!buffer) co_return tl::unexpected(buffer.error());
  buffer->truncate(header.length);
  auto n = co_await reader.read_up_to(buffer->writable());
  if (!n || *n < header.length) co_return n;
  buffer->truncate(static_cast<std::size_t>(image_size - header.offset));
  if (Status s = co_await writer.write(header.offset, std::move(*buffer)); !s) co_return tl::unexpected(s.error());
  co_return *n;
}

}  // namespace

awaitable<Result<ReceiveResult>> receive_chunked(StreamReader& reader, Destination& destination,
                                                 const ReceiveOptions& options) {
  ChunkLimits limits;
  limits.image_size = options.image_size;
  limits.max_length = static_cast<std::uint32_t>(options.piece);
  if (Status s = check_chunk_limits(limits); !s) co_return tl::unexpected(s.error());

  ReceiveWriter writer(co_await asio::this_coro::executor, destination, options, reader);
  std::uint64_t received = 0;
  std::uint64_t chunks = 0;
  Status failure;
  for (;;) {
    std::array<std::byte, chunk_header_size> bytes{};
    const std::uint64_t at = reader.position();
    auto got = co_await reader.read_up_to(bytes);
    if (!got) {
      failure = tl::unexpected(got.error());
      break;
    }
    if (*got < bytes.size()) {
      failure = stream_error(std::errc::connection_reset,
                             *got == 0 ? "the stream ended after " + std::to_string(chunks) +
                                             " chunks without the terminator (12 zero bytes): the sender stopped"
                                             " before the end of the image"
                                       : "the stream ended inside a chunk header (" + std::to_string(*got) +
                                             " of 12 bytes, at stream byte " + std::to_string(at) + ")");
      break;
    }
    auto header = decode_chunk_header(bytes, limits);
    if (!header) {
      failure = tl::unexpected(header.error());
      if (at == 0 && !reader.stream().is_tls() && starts_with_tls_client_hello(bytes))
        failure = fail(std::errc::protocol_error, tls_on_plaintext_listener("tcp://"));
      break;
    }
    if (header->is_terminator()) {
      // Bytes behind the end marker: a sender that framed something else (a raw image
      // starting with 12 zero bytes) or a stream cut and spliced. Not the image it meant.
      auto more = co_await bytes_follow(reader, options.trailing_grace);
      if (more && *more > 0)
        failure = fail(std::errc::protocol_error,
                       "bytes follow the Chunked end marker at stream byte " + std::to_string(at) + " (at least " +
                           std::to_string(*more) + " more arrived after " + std::to_string(chunks) +
                           " chunks): the sender did not send this Chunked stream; nothing is flushed or"
                           " reported as done");
      break;
    }
    auto n = co_await receive_payload(reader, writer, *header, options.image_size);
    if (!n) {
      failure = tl::unexpected(Error{n.error().code, "chunk at offset " + std::to_string(header->offset) +
                                                         ": " + n.error().message});
      break;
    }
    received += *n;
    if (*n < header->length) {
      failure = stream_error(std::errc::connection_reset,
                             "chunk at offset " + std::to_string(header->offset) +
                                 ": the stream ended inside the payload (" + std::to_string(*n) + " of " +
                                 std::to_string(header->length) + " bytes)");
      break;
    }
    ++chunks;
  }
  // A failed write is the root cause when the network side was stopped because of it.
  Status written = co_await writer.drain();
  if (!written) co_return tl::unexpected(written.error());
  if (!failure) co_return tl::unexpected(failure.error());
  co_return co_await writer.finish(received);
}

}  // namespace sluice
