// Source: one of the two halves of the ops table the copier drives. A file, a block
// device or an NBD export all look the same from here.
#pragma once

#include <chrono>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/block_sizes.hpp"
#include "engine/error.hpp"
#include "engine/extent.hpp"
#include "engine/file_slice.hpp"
#include "engine/stats.hpp"

namespace sluice {

// What a source says about itself; the copy is planned from it (engine/copy_plan.hpp).
// The same kind of facts as DestinationTraits.
struct SourceTraits {
  BlockSizes block_sizes{};
  // How long a request takes to come back when nothing else is queued (a network
  // source's measured round trip); zero for local sources.
  std::chrono::microseconds round_trip{0};
  // read() and extents() may be called from several event loops at once, one per lane
  // of a striped copy (CopyOptions::lanes), once serve_lanes() has been called.
  bool serves_lanes = false;
  // file_slice() names where the bytes lie: a plain file, nothing to decode. Their
  // payload can then go to the destination by reference.
  bool gives_file_slices = false;
};

class Source {
 public:
  virtual ~Source() = default;

  virtual std::uint64_t size() const = 0;
  virtual std::string format() const { return "raw"; }
  virtual std::string describe() const = 0;
  virtual SourceTraits traits() const = 0;

  // The allocation map from `offset`: contiguous extents starting exactly at `offset`,
  // covering at least one byte, ending no later than size(). They may stop before
  // offset + length_hint (the caller asks again) or go past it.
  virtual awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset,
                                                          std::uint64_t length_hint) = 0;

  // Fills `into` with the bytes at `offset`. The range lies within size(). Called
  // concurrently, up to the copy's depth; the caller owns `into` until completion.
  virtual awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) = 0;

  // Where the bytes at [offset, offset + length) lie in a file that can be spliced
  // from. Only called when traits().gives_file_slices is true.
  virtual std::optional<FileSlice> file_slice(std::uint64_t /*offset*/, std::uint64_t /*length*/) const {
    return std::nullopt;
  }

  // The copy runs in lanes from now on: read() and extents() are called from several
  // event loops at once, each lane from its own. Called once on the caller's loop
  // before any lane starts, only where traits().serves_lanes; the source may then read
  // on the calling loop's thread, so each lane's thread does its own copying.
  virtual void serve_lanes() {}

  virtual awaitable<Status> close() { co_return Status{}; }

  // Makes operations in progress fail promptly (a sibling stage failed).
  virtual void abort() {}

  virtual void add_stats(TransferStats&) const {}
};

}  // namespace sluice
