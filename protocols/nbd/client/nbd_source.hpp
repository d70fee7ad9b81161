// An NBD export as the copy's Source.
//
// The allocation map comes from BLOCK_STATUS base:allocation, asked for one window at
// a time as the copy advances (never the whole disk up front), each request capped so
// a slow server answers each quickly; HOLE and ZERO both mean the range reads as zeros.
// Without base:allocation (no structured replies, or a server without the context)
// everything is data. Reads go out concurrently, spread over the connections.
#pragma once

#include <memory>

#include "engine/source.hpp"
#include "protocols/nbd/client/export_client.hpp"

namespace sluice::nbd {

class NbdSource final : public Source {
 public:
  // Longest range one BLOCK_STATUS asks about.
  static constexpr std::uint32_t max_block_status_length = 1u << 30;

  static awaitable<Result<std::unique_ptr<NbdSource>>> open(const Target& target, ClientOptions options);

  std::uint64_t size() const override { return client_->facts().size; }
  std::string describe() const override { return client_->display(); }
  SourceTraits traits() const override {
    SourceTraits traits;
    traits.block_sizes = client_->facts().block_sizes;
    traits.round_trip = client_->facts().round_trip;
    return traits;
  }
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length_hint) override;
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override;
  awaitable<Status> close() override;
  void abort() override { client_->abort(); }
  void add_stats(TransferStats& stats) const override;

  const NegotiatedExport& facts() const { return client_->facts(); }

 private:
  explicit NbdSource(std::unique_ptr<ExportClient> client) : client_(std::move(client)) {}
  std::unique_ptr<ExportClient> client_;
};

}  // namespace sluice::nbd
