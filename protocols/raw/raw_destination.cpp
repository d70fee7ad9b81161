#include "protocols/raw/raw_destination.hpp"

#include <algorithm>

#include "protocols/common/peer_close.hpp"
#include "protocols/common/send_failure.hpp"
#include "protocols/common/stream_stats.hpp"
#include "protocols/common/zero_block.hpp"

namespace sluice {

RawDestination::RawDestination(std::unique_ptr<Stream> stream, std::uint64_t image_size, std::string what)
    : stream_(std::move(stream)), image_size_(image_size), what_(std::move(what)) {}

DestinationTraits RawDestination::traits() const {
  DestinationTraits traits;
  traits.known_zero = false;
  traits.zero_is_cheap = false;
  traits.ordered = true;  // a byte stream has no offsets
  traits.block_sizes = BlockSizes{1, 4096, 32u << 20};
  traits.takes_file_slices = stream_->splices();
  traits.file_slices_pay = traits.takes_file_slices;
  return traits;
}

awaitable<Status> RawDestination::send_zeros_until(std::uint64_t end) {
  while (next_ < end) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(end - next_, zero_block_size));
    if (Status s = explain_send_failure(co_await stream_->send(Frame{{}, zero_block().first(n)})); !s) co_return s;
    next_ += n;
  }
  co_return Status{};
}

awaitable<Status> RawDestination::write(std::uint64_t offset, Buffer data) {
  if (finished_ || offset < next_ || offset > image_size_ || data.size() > image_size_ - offset)
    co_return fail_at("raw stream write (out of order or beyond the image)", offset,
                      std::make_error_code(std::errc::invalid_argument));
  if (Status s = co_await send_zeros_until(offset); !s) co_return s;
  Status status = explain_send_failure(co_await stream_->send(Frame{{}, data.bytes()}));
  if (status) next_ += data.size();
  co_return status;
}

awaitable<Status> RawDestination::write_file(std::uint64_t offset, FileSlice slice) {
  if (finished_ || offset < next_ || offset > image_size_ || slice.length > image_size_ - offset)
    co_return fail_at("raw stream write (out of order or beyond the image)", offset,
                      std::make_error_code(std::errc::invalid_argument));
  if (Status s = co_await send_zeros_until(offset); !s) co_return s;
  Status status = explain_send_failure(co_await stream_->send(Frame{{}, {}, slice}));
  if (status) next_ += slice.length;
  co_return status;
}

awaitable<Status> RawDestination::zero(std::uint64_t offset, std::uint64_t length, ZeroMode) {
  if (finished_ || offset < next_ || offset > image_size_ || length > image_size_ - offset)
    co_return fail_at("raw stream zeroing (out of order or beyond the image)", offset,
                      std::make_error_code(std::errc::invalid_argument));
  co_return co_await send_zeros_until(offset + length);
}

awaitable<Status> RawDestination::finish() {
  if (finished_) co_return Status{};
  Status status = co_await send_zeros_until(image_size_);
  finished_ = true;
  OneWayEnd end = co_await end_one_way_stream(*stream_, status);
  final_stats_ = end.stats;
  co_return end.status;
}

void RawDestination::abort() { stream_->abort(); }

void RawDestination::add_stats(TransferStats& stats) const {
  add_stream_stats(finished_ ? final_stats_ : stream_->stats(), stream_->is_tls(), stats);
}

}  // namespace sluice
