#include "protocols/nbd/client/nbd_source.hpp"

#include <algorithm>

namespace sluice::nbd {

awaitable<Result<std::unique_ptr<NbdSource>>> NbdSource::open(const Target& target, ClientOptions options) {
  options.allocation_map = true;
  auto client = co_await ExportClient::open(target, std::move(options));
  if (!client) co_return tl::unexpected(client.error());
  co_return std::unique_ptr<NbdSource>(new NbdSource(std::move(*client)));
}

awaitable<Result<std::vector<Extent>>> NbdSource::extents(std::uint64_t offset, std::uint64_t length_hint) {
  const NegotiatedExport& facts = client_->facts();
  if (offset >= facts.size) co_return fail(std::errc::invalid_argument, "extents asked beyond the end of " + describe());
  const std::uint64_t remaining = facts.size - offset;
  if (!facts.allocation_context) co_return std::vector<Extent>{Extent{offset, remaining, ExtentKind::data}};

  const std::uint64_t minimum = facts.block_sizes.minimum;
  std::uint64_t length = std::min<std::uint64_t>({std::max<std::uint64_t>(length_hint, 1), remaining,
                                                  max_block_status_length});
  // Obey the minimum block size, except for a tail shorter than it.
  if (length >= minimum) length -= length % minimum;
  auto extents = co_await client_->block_status(offset, static_cast<std::uint32_t>(length));
  if (!extents) co_return tl::unexpected(extents.error());
  // The last extent may run past the request; never past the export.
  std::vector<Extent> out;
  out.reserve(extents->size());
  for (const Extent& e : *extents) {
    if (e.offset >= facts.size) break;
    out.push_back(Extent{e.offset, std::min(e.end(), facts.size) - e.offset, e.kind});
  }
  if (out.empty())
    co_return fail_at("NBD BLOCK_STATUS of " + describe() + " (no extents in the reply)", offset,
                      std::make_error_code(std::errc::protocol_error));
  co_return out;
}

awaitable<Status> NbdSource::read(std::uint64_t offset, std::span<std::byte> into) {
  // The copier never asks for more than the maximum payload; other callers might.
  const std::size_t maximum = client_->facts().block_sizes.maximum;
  while (into.size() > maximum) {
    if (Status s = co_await client_->read(offset, into.first(maximum)); !s) co_return s;
    offset += maximum;
    into = into.subspan(maximum);
  }
  co_return co_await client_->read(offset, into);
}

awaitable<Status> NbdSource::close() {
  co_await client_->disconnect();
  co_return Status{};
}

void NbdSource::add_stats(TransferStats& stats) const {
  // The destination's transport figures win when both ends are on the network.
  if (stats.connections) return;
  client_->add_stats(stats);
}

}  // namespace sluice::nbd
