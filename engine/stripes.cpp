#include "engine/stripes.hpp"

#include <algorithm>

namespace sluice {

Stripes::Stripes(std::uint64_t image_size, std::uint64_t stripe_size)
    : size_(image_size),
      stripe_size_(stripe_size == 0 || stripe_size >= image_size ? image_size : stripe_size),
      edges_(stripe_size_ == 0 ? 1 : (image_size + stripe_size_ - 1) / stripe_size_) {}

std::optional<Stripe> Stripes::claim() {
  const std::uint64_t index = next_.fetch_add(1, std::memory_order_relaxed);
  if (index >= edges_.size()) return std::nullopt;
  const std::uint64_t offset = index * stripe_size_;
  return Stripe{index, offset, std::min(stripe_size_, size_ - offset)};
}

void Stripes::record_edges(std::uint64_t index, ExtentKind first, ExtentKind last) {
  edges_[index] = Edges{first, last, true};
}

std::uint64_t Stripes::counted_twice(ExtentKind kind) const {
  std::uint64_t twice = 0;
  for (std::size_t i = 1; i < edges_.size(); ++i)
    if (edges_[i - 1].recorded && edges_[i].recorded && edges_[i - 1].last == kind && edges_[i].first == kind)
      ++twice;
  return twice;
}

}  // namespace sluice
