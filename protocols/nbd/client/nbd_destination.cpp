#include "protocols/nbd/client/nbd_destination.hpp"

#include <algorithm>
#include <cstring>

#include "engine/credits.hpp"
#include "engine/task_group.hpp"

namespace sluice::nbd {

ExportClient::Check NbdDestination::accepts(std::uint64_t size) {
  return [size](const NegotiatedExport& facts) -> Status {
    if (facts.read_only())
      return fail(std::errc::read_only_file_system,
                  "the export '" + facts.name + "' is read-only; nothing was written");
    if (facts.size < size)
      return fail(std::errc::no_space_on_device,
                  "the export '" + facts.name + "' holds " + std::to_string(facts.size) +
                      " bytes, fewer than the source's " + std::to_string(size) + "; nothing was written");
    // The last request would end mid-block, which the server has said it refuses:
    // fail now rather than after everything before it was written. Ending at the
    // export's own end is the exception: an export whose size is not a whole number
    // of its blocks can only be written to the end that way, so its server takes it.
    const std::uint32_t minimum = facts.block_sizes.minimum;
    if (minimum > 1 && size % minimum != 0 && size != facts.size)
      return fail(std::errc::invalid_argument,
                  "the export '" + facts.name + "' takes whole blocks of " + std::to_string(minimum) +
                      " bytes, and the source's " + std::to_string(size) +
                      " bytes are not a whole number of them; nothing was written");
    return Status{};
  };
}

awaitable<Result<std::unique_ptr<NbdDestination>>> NbdDestination::open(const Target& target, std::uint64_t size,
                                                                         ClientOptions options) {
  options.allocation_map = false;
  ExportClient::Check check = accepts(size);
  auto client = co_await ExportClient::open(target, std::move(options), std::move(check));
  if (!client) co_return tl::unexpected(client.error());
  co_return std::unique_ptr<NbdDestination>(new NbdDestination(std::move(*client)));
}

awaitable<Result<std::unique_ptr<NbdDestination>>> NbdDestination::open_on(std::unique_ptr<Stream> stream,
                                                                            std::string display, std::uint64_t size,
                                                                            ClientOptions options) {
  options.allocation_map = false;
  ExportClient::Check check = accepts(size);
  auto client =
      co_await ExportClient::open_on(std::move(stream), std::move(display), std::move(options), std::move(check));
  if (!client) co_return tl::unexpected(client.error());
  co_return std::unique_ptr<NbdDestination>(new NbdDestination(std::move(*client)));
}

NbdDestination::NbdDestination(std::unique_ptr<ExportClient> client) : client_(std::move(client)) {
  if (facts().can_write_zeroes()) return;
  std::size_t piece_limit = std::min<std::size_t>(zero_write_size, facts().block_sizes.maximum);
  piece_limit -= piece_limit % facts().block_sizes.minimum;
  zeros_ = Buffer::allocate(piece_limit);
  std::memset(zeros_.writable().data(), 0, zeros_.size());
}

DestinationTraits NbdDestination::traits() const {
  DestinationTraits traits;
  traits.known_zero = false;  // an export's old contents are unknown (--prezeroed says otherwise)
  traits.zero_is_cheap = facts().can_write_zeroes();
  traits.ordered = false;
  traits.block_sizes = facts().block_sizes;
  traits.round_trip = facts().round_trip;
  traits.releases_buffers_when_sent = true;  // Connection::write drops it once sent
  traits.takes_lanes = true;
  traits.takes_file_slices = client_->splices();
  // No: slower than buffered WRITEs on loopback, no faster through the rig's relay
  // (docs/benchmarks.md, section "The NBD client's WRITEs stay buffered").
  traits.file_slices_pay = false;
  return traits;
}

awaitable<Status> NbdDestination::write(std::uint64_t offset, Buffer data) {
  co_return co_await client_->write(offset, std::move(data));
}

awaitable<Status> NbdDestination::write_file(std::uint64_t offset, FileSlice slice) {
  co_return co_await client_->write_file(offset, slice);
}

awaitable<Status> NbdDestination::zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) {
  if (!facts().can_write_zeroes()) co_return co_await write_zeros(offset, length);
  const std::uint16_t flags = mode == ZeroMode::allocate ? command_flag::no_hole : 0;
  while (length > 0) {
    const BlockSizes& sizes = facts().block_sizes;
    const auto piece = static_cast<std::uint32_t>(std::min(length, zero_limit_.load(std::memory_order_relaxed)));
    Status s = co_await client_->write_zeroes(offset, piece, flags);
    if (!s && piece > sizes.preferred &&
        (s.error().code == std::errc::invalid_argument || s.error().code == std::errc::value_too_large)) {
      // Perhaps only too long: not every server takes what needs no payload in one
      // piece, and some say so without advertising a limit. Below the preferred size
      // the error is the server's last word.
      lower_zero_limit(piece / 2);
      continue;  // the same range again, in shorter pieces
    }
    if (!s) co_return s;
    offset += piece;
    length -= piece;
  }
  co_return Status{};
}

// To at most `wanted`, whole blocks, never below one block. Lanes refused at once may
// each lower it; it is never raised again, whichever comes last.
void NbdDestination::lower_zero_limit(std::uint64_t wanted) {
  const std::uint32_t minimum = facts().block_sizes.minimum;
  const std::uint64_t lower = std::max<std::uint64_t>(wanted - wanted % minimum, minimum);
  std::uint64_t seen = zero_limit_.load(std::memory_order_relaxed);
  while (lower < seen && !zero_limit_.compare_exchange_weak(seen, lower, std::memory_order_relaxed)) {
    // `seen` now holds the value another lane stored; compared again.
  }
}

// Without WRITE_ZEROES the only way to zero is to write zeros: one shared zero block,
// several WRITEs in flight.
awaitable<Status> NbdDestination::write_zeros(std::uint64_t offset, std::uint64_t length) {
  const std::size_t piece_limit = zeros_.size();
  auto ex = co_await asio::this_coro::executor;
  Credits slots(ex, zero_writes_in_flight);
  TaskGroup writes(ex, [&slots](const Error&) { slots.close(); });
  while (length > 0 && !writes.failed()) {
    const std::size_t piece = static_cast<std::size_t>(std::min<std::uint64_t>(length, piece_limit));
    if (!co_await slots.acquire()) break;
    writes.spawn([](ExportClient& client, std::uint64_t at, std::span<const std::byte> bytes,
                    Credits& credits) -> awaitable<Status> {
      Status s = co_await client.write(at, bytes);
      credits.release();
      co_return s;
    }(*client_, offset, zeros_.bytes().first(piece), slots));
    offset += piece;
    length -= piece;
  }
  co_return co_await writes.join();
}

awaitable<Status> NbdDestination::flush() { co_return co_await client_->flush(); }

awaitable<Status> NbdDestination::finish() {
  co_await client_->disconnect();
  co_return Status{};
}

awaitable<Status> NbdDestination::close() {
  co_await client_->disconnect();
  co_return Status{};
}

}  // namespace sluice::nbd
