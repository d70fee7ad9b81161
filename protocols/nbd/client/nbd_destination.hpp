// An NBD export as the copy's Destination.
//
//  - WRITE, many in flight (the copy's depth), spread over the connections; each
//    header sits in its buffer's headroom so header and data leave as one span.
//  - Zero ranges: WRITE_ZEROES where the server has it (with NO_HOLE when the range
//    must stay allocated), explicit zero WRITEs where it does not. Never TRIM: what a
//    trimmed range reads as is undefined.
//  - flush(): FLUSH on every connection (the copier calls it after every write
//    completed); finish(): DISC and close.
//
// Opening refuses a read-only export and one smaller than the source before any data
// moves.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "engine/destination.hpp"
#include "protocols/nbd/client/export_client.hpp"

namespace sluice::nbd {

class NbdDestination final : public Destination {
 public:
  // Longest WRITE_ZEROES sent (the copier's zero items are smaller still).
  static constexpr std::uint32_t max_zero_length = 1u << 30;
  // Largest explicit zero WRITE, when the server has no WRITE_ZEROES.
  static constexpr std::uint32_t zero_write_size = 1u << 20;
  // Explicit zero WRITEs one zero() call keeps in flight.
  static constexpr std::size_t zero_writes_in_flight = 8;

  // `size`: the source's size, which the export must hold.
  static awaitable<Result<std::unique_ptr<NbdDestination>>> open(const Target& target, std::uint64_t size,
                                                                 ClientOptions options);
  // Over a stream already connected to an NBD server (the HTTP import's
  // "Transfer-Encoding: nbd"); `display` names it in messages.
  static awaitable<Result<std::unique_ptr<NbdDestination>>> open_on(std::unique_ptr<Stream> stream,
                                                                    std::string display, std::uint64_t size,
                                                                    ClientOptions options);

  DestinationTraits traits() const override;
  std::string describe() const override { return client_->display(); }
  awaitable<Status> write(std::uint64_t offset, Buffer data) override;
  // Lanes run on the connections' loops, each lane writing through its own.
  std::vector<executor> lane_loops() const override { return client_->loops(); }
  void serve_lanes() override { client_->serve_lanes(); }
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice) override;
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) override;
  awaitable<Status> flush() override;
  awaitable<Status> finish() override;
  awaitable<Status> close() override;
  void abort() override { client_->abort(); }
  void add_stats(TransferStats& stats) const override { client_->add_stats(stats); }

  const NegotiatedExport& facts() const { return client_->facts(); }

 private:
  explicit NbdDestination(std::unique_ptr<ExportClient> client);
  static ExportClient::Check accepts(std::uint64_t size);
  awaitable<Status> write_zeros(std::uint64_t offset, std::uint64_t length);
  void lower_zero_limit(std::uint64_t wanted);

  std::unique_ptr<ExportClient> client_;
  // Shared by every explicit zero WRITE, from every lane; never written to. Made at
  // opening, only for a server without WRITE_ZEROES.
  Buffer zeros_;
  // Longest WRITE_ZEROES to send now: halved each time the server refuses a long one
  // as too long (EINVAL or EOVERFLOW, as the spec allows past its maximum payload).
  // Lanes on other threads read and lower it; any value one of them sees is safe.
  std::atomic<std::uint64_t> zero_limit_ = max_zero_length;
};

}  // namespace sluice::nbd
