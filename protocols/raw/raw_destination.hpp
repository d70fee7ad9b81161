// The sending end of a raw ("none") stream, as a copy Destination: the image's bytes
// in order from offset 0, no framing, so the receiver must know the size. Zero ranges
// are sent as zeros. Ranges the copier skips (--prezeroed) are sent as zeros too: a
// byte stream cannot seek, and vhd-tool fails there instead.
#pragma once

#include <memory>

#include "engine/destination.hpp"
#include "engine/net/stream.hpp"

namespace sluice {

class RawDestination final : public Destination {
 public:
  RawDestination(std::unique_ptr<Stream> stream, std::uint64_t image_size, std::string what);

  DestinationTraits traits() const override;
  std::string describe() const override { return what_; }
  awaitable<Status> write(std::uint64_t offset, Buffer data) override;
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) override;
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice) override;
  awaitable<Status> flush() override { co_return Status{}; }
  // Sends zeros up to the image's end if the copier skipped the last range, then
  // closes the stream.
  awaitable<Status> finish() override;
  void abort() override;
  void add_stats(TransferStats& stats) const override;

  std::uint64_t position() const { return next_; }

 private:
  awaitable<Status> send_zeros_until(std::uint64_t end);

  std::unique_ptr<Stream> stream_;
  std::uint64_t image_size_;
  std::string what_;
  std::uint64_t next_ = 0;  // the next byte the stream carries
  StreamStats final_stats_;
  bool finished_ = false;
};

}  // namespace sluice
