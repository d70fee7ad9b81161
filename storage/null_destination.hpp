// null: - accepts everything and keeps nothing. Measures the source side alone, or,
// behind `sluice serve --output null:`, the link alone (as iperf3's receiver does).
#pragma once

#include "engine/destination.hpp"
#include "engine/unique_fd.hpp"

namespace sluice {

class NullDestination final : public Destination {
 public:
  DestinationTraits traits() const override {
    DestinationTraits traits;
    traits.known_zero = true;  // nothing to zero: nothing is kept
    traits.discards = true;
    traits.takes_lanes = true;  // nothing is kept, so nothing is shared
    // A receiver's spliced payload is dropped where it is, in the kernel: splicing a
    // pipe into /dev/null releases the page references without reading a byte, so a
    // link test measures the link and not this process's memory copies.
    traits.takes_pipes = true;
    return traits;
  }
  std::string describe() const override { return "null:"; }
  awaitable<Status> write(std::uint64_t, Buffer) override { co_return Status{}; }

  awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t length, int pipe) override;

  awaitable<Status> zero(std::uint64_t, std::uint64_t, ZeroMode) override { co_return Status{}; }
  awaitable<Status> flush() override { co_return Status{}; }
  awaitable<Status> finish() override { co_return Status{}; }

 private:
  UniqueFd dev_null_;  // opened on the first spliced payload
};

}  // namespace sluice
