// A VHD chain (fixed, dynamic or differencing, with its parents) as a Source: the
// virtual disk, each sector from the first member that holds it.
#pragma once

#include <memory>
#include <string>

#include "engine/asio.hpp"
#include "engine/source.hpp"
#include "engine/uring/file_ring.hpp"
#include "storage/vhd/vhd_chain.hpp"

namespace sluice {

class VhdSource final : public Source {
 public:
  static Result<std::unique_ptr<VhdSource>> open(executor ex, const std::string& path,
                                                 const vhd::ChainOptions& options);

  std::uint64_t size() const override { return chain_.size(); }
  std::string format() const override { return "vhd"; }
  std::string describe() const override { return chain_.members.front().path; }
  SourceTraits traits() const override;
  // Holes where no member holds a block, data elsewhere.
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length_hint) override;
  // Each contiguous run in one member file is one read; sectors no member holds are zeros.
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override;
  // Only for a lone fixed VHD (traits().gives_file_slices): its data is the file's prefix.
  std::optional<FileSlice> file_slice(std::uint64_t offset, std::uint64_t length) const override;
  void serve_lanes() override { in_lanes_ = true; }
  // Fails if a member file shrank while it was being read.
  awaitable<Status> close() override;

  const vhd::Chain& chain() const { return chain_; }

 private:
  VhdSource(executor ex, vhd::Chain chain);
  bool is_plain_fixed() const;

  vhd::Chain chain_;
  FileRing& ring_;
  bool in_lanes_ = false;
};

}  // namespace sluice
