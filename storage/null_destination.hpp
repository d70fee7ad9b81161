// null: - accepts everything and keeps nothing. Measures the source side alone.
#pragma once

#include "engine/destination.hpp"

namespace sluice {

class NullDestination final : public Destination {
 public:
  DestinationTraits traits() const override {
    DestinationTraits traits;
    traits.known_zero = true;  // nothing to zero: nothing is kept
    return traits;
  }
  std::string describe() const override { return "null:"; }
  awaitable<Status> write(std::uint64_t, Buffer) override { co_return Status{}; }
  awaitable<Status> zero(std::uint64_t, std::uint64_t, ZeroMode) override { co_return Status{}; }
  awaitable<Status> flush() override { co_return Status{}; }
  awaitable<Status> finish() override { co_return Status{}; }
};

}  // namespace sluice
