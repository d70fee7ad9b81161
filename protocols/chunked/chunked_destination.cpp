#include "protocols/chunked/chunked_destination.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "engine/task_group.hpp"
#include "engine/uring/file_ring.hpp"
#include "protocols/common/peer_close.hpp"
#include "protocols/common/send_failure.hpp"
#include "protocols/common/stream_stats.hpp"
#include "protocols/common/zero_block.hpp"

namespace sluice {

namespace {
constexpr std::uint32_t max_chunk = default_max_chunk_length;
static_assert(zero_block_size >= max_chunk);
}  // namespace

ChunkedDestination::ChunkedDestination(std::unique_ptr<Stream> stream, std::uint64_t image_size, std::string what)
    : stream_(std::move(stream)), image_size_(image_size), what_(std::move(what)) {}

DestinationTraits ChunkedDestination::traits() const {
  DestinationTraits traits;
  traits.known_zero = false;      // the receiver never zero-fills
  traits.zero_is_cheap = false;   // zeros cost as many bytes as data
  traits.ordered = false;         // every chunk carries its offset
  // No preference of its own: --request-size decides, up to vhd-tool's 2 MiB.
  traits.block_sizes = BlockSizes{chunk_sector_size, 4096, max_chunk};
  traits.takes_file_slices = stream_->splices();
  traits.file_slices_pay = traits.takes_file_slices;
  return traits;
}

Status ChunkedDestination::check_range(std::uint64_t offset, std::uint64_t length) const {
  if (finished_) return fail(std::errc::invalid_argument, what_ + ": the stream was already finished");
  if (offset % chunk_sector_size != 0)
    return fail_at("chunked write (offset not a multiple of 512)", offset,
                   std::make_error_code(std::errc::invalid_argument));
  if (offset > image_size_ || length > image_size_ - offset)
    return fail_at("chunked write (beyond the image's end)", offset,
                   std::make_error_code(std::errc::invalid_argument));
  // Only the image's last sector may be partial; it is padded on the wire.
  if (length % chunk_sector_size != 0 && offset + length != image_size_)
    return fail_at("chunked write (length not a multiple of 512)", offset,
                   std::make_error_code(std::errc::invalid_argument));
  return Status{};
}

awaitable<Status> ChunkedDestination::send_chunk(const ChunkHeader& header, std::span<const std::byte> payload) {
  std::array<std::byte, chunk_header_size> bytes{};
  if (Status s = encode_chunk_header(header, bytes); !s) co_return s;
  // A detached header: the stream stages it with the start of the payload, so it
  // still shares a record with payload under TLS.
  co_return explain_send_failure(co_await stream_->send(Frame{bytes, payload}));
}

awaitable<Status> ChunkedDestination::write(std::uint64_t offset, Buffer data) {
  if (Status s = check_range(offset, data.size()); !s) co_return s;
  const std::span<const std::byte> payload = data.bytes();
  const std::size_t whole = payload.size() / chunk_sector_size * chunk_sector_size;
  std::size_t done = 0;
  while (done < whole) {
    const std::size_t length = std::min<std::size_t>(whole - done, max_chunk);
    const ChunkHeader header{offset + done, static_cast<std::uint32_t>(length)};
    Status status;
    if (done == 0 && data.headroom() >= chunk_header_size) {
      // The common case: the header goes into the headroom, in front of its payload.
      auto head = data.prefix(chunk_header_size);
      if (Status s = encode_chunk_header(header, head); !s) co_return s;
      status = explain_send_failure(co_await stream_->send(Frame{head, payload.first(length)}));
    } else {
      // The bytes in front of a later piece are the previous piece's payload.
      status = co_await send_chunk(header, payload.subspan(done, length));
    }
    if (!status) co_return status;
    done += length;
  }
  if (done < payload.size()) {
    // The image's partial last sector, padded with zeros as vhd-tool pads it.
    std::array<std::byte, chunk_sector_size> sector{};
    std::memcpy(sector.data(), payload.data() + done, payload.size() - done);
    if (Status s = co_await send_chunk(ChunkHeader{offset + done, chunk_sector_size}, sector); !s) co_return s;
  }
  co_return Status{};
}

awaitable<Status> ChunkedDestination::write_file(std::uint64_t offset, FileSlice slice) {
  if (Status s = check_range(offset, slice.length); !s) co_return s;
  const std::uint64_t whole = slice.length / chunk_sector_size * chunk_sector_size;
  std::vector<std::array<std::byte, chunk_header_size>> headers;
  headers.reserve(static_cast<std::size_t>((whole + max_chunk - 1) / max_chunk));
  std::vector<FileSlice> pieces;
  for (std::uint64_t done = 0; done < whole;) {
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(whole - done, max_chunk));
    auto& bytes = headers.emplace_back();
    if (Status s = encode_chunk_header(ChunkHeader{offset + done, n}, bytes); !s) co_return s;
    pieces.push_back(FileSlice{slice.fd, slice.offset + done, n});
    done += n;
  }
  // All of the request's chunks are queued at once, so the stream knows more follows.
  TaskGroup sends(co_await asio::this_coro::executor);
  for (std::size_t i = 0; i < headers.size(); ++i) sends.spawn(stream_->send(Frame{headers[i], {}, pieces[i]}));
  if (Status s = explain_send_failure(co_await sends.join()); !s) co_return s;
  if (whole < slice.length)
    co_return co_await send_padded_tail(offset + whole, FileSlice{slice.fd, slice.offset + whole, slice.length - whole});
  co_return Status{};
}

awaitable<Status> ChunkedDestination::send_padded_tail(std::uint64_t offset, FileSlice tail) {
  // The image's partial last sector cannot be padded on the way through a pipe: it is
  // read (a few hundred bytes) and sent from memory.
  std::array<std::byte, chunk_sector_size> sector{};
  FileRing& ring = FileRing::of(co_await asio::this_coro::executor);
  auto bytes = std::span<std::byte>(sector).first(static_cast<std::size_t>(tail.length));
  if (Status s = co_await ring_read_exactly(ring, tail.fd, tail.offset, bytes, false); !s) co_return s;
  co_return co_await send_chunk(ChunkHeader{offset, chunk_sector_size}, sector);
}

awaitable<Status> ChunkedDestination::zero(std::uint64_t offset, std::uint64_t length, ZeroMode) {
  if (Status s = check_range(offset, length); !s) co_return s;
  // The padded end: a zero range that ends the image ends on its padded last sector.
  const std::uint64_t end = offset + (length + chunk_sector_size - 1) / chunk_sector_size * chunk_sector_size;
  std::vector<std::array<std::byte, chunk_header_size>> headers;
  headers.reserve(static_cast<std::size_t>((end - offset + max_chunk - 1) / max_chunk));
  std::vector<std::span<const std::byte>> payloads;
  for (std::uint64_t at = offset; at < end;) {
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(end - at, max_chunk));
    auto& bytes = headers.emplace_back();
    if (Status s = encode_chunk_header(ChunkHeader{at, n}, bytes); !s) co_return s;
    payloads.push_back(zero_block().first(n));
    at += n;
  }
  // Queue every chunk at once: the stream then knows more follows and gathers them
  // (MSG_MORE between writes) instead of ending each chunk with a short segment.
  TaskGroup sends(co_await asio::this_coro::executor);
  for (std::size_t i = 0; i < headers.size(); ++i) sends.spawn(stream_->send(Frame{headers[i], payloads[i]}));
  co_return explain_send_failure(co_await sends.join());
}

awaitable<Status> ChunkedDestination::finish() {
  if (finished_) co_return Status{};
  finished_ = true;
  Status status = explain_send_failure(co_await stream_->send(Frame{chunk_terminator_bytes, {}}));
  OneWayEnd end = co_await end_one_way_stream(*stream_, status);
  final_stats_ = end.stats;
  co_return end.status;
}

void ChunkedDestination::abort() { stream_->abort(); }

void ChunkedDestination::add_stats(TransferStats& stats) const {
  add_stream_stats(finished_ ? final_stats_ : stream_->stats(), stream_->is_tls(), stats);
}

}  // namespace sluice
