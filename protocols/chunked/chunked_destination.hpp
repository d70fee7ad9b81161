// The sending end of a Chunked stream, as a copy Destination: each write becomes
// `header || payload` with the 12-byte header encoded into the buffer's headroom, so
// header and payload are one contiguous frame (one iovec, one SSL_write, records
// shared). Zero ranges become chunks sent from a shared zero block, because the
// receiver never zero-fills; with --prezeroed the copier skips them instead. finish()
// sends the terminator and closes the stream; a failed or abandoned transfer never
// sends it, so the receiver sees a truncated stream, not a success.
//
// An image whose size is not a multiple of 512 goes out padded to the next sector,
// as vhd-tool sends it: the last chunk's payload ends with zeros and its length is a
// multiple of 512 (receivers write only the part inside the image).
#pragma once

#include <memory>

#include "engine/destination.hpp"
#include "engine/net/stream.hpp"
#include "protocols/chunked/chunk_header.hpp"

namespace sluice {

class ChunkedDestination final : public Destination {
 public:
  // `image_size` is the source's size; `what` names the peer in messages
  // ("chunked tcp 10.0.0.2:8000").
  ChunkedDestination(std::unique_ptr<Stream> stream, std::uint64_t image_size, std::string what);

  DestinationTraits traits() const override;
  std::string describe() const override { return what_; }
  awaitable<Status> write(std::uint64_t offset, Buffer data) override;
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) override;
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice) override;
  // Nothing to do: the protocol has no acknowledgements, so the sender cannot know
  // (or make) the receiver's storage durable; vhd-tool's receiver fsyncs on the
  // terminator.
  awaitable<Status> flush() override { co_return Status{}; }
  awaitable<Status> finish() override;
  void abort() override;
  void add_stats(TransferStats& stats) const override;

 private:
  awaitable<Status> send_chunk(const ChunkHeader& header, std::span<const std::byte> payload);
  awaitable<Status> send_padded_tail(std::uint64_t offset, FileSlice tail);
  Status check_range(std::uint64_t offset, std::uint64_t length) const;

  std::unique_ptr<Stream> stream_;
  std::uint64_t image_size_;
  std::string what_;
  StreamStats final_stats_;
  bool finished_ = false;
};

}  // namespace sluice
