// Stripes: the image cut into equal byte ranges that the lanes of a copy claim one at
// a time, lowest offset first, so a lane that meets holes takes more stripes and none
// sits idle while another still has data to read.
//
// It also keeps what extent counting needs across lanes: the kind of the first and the
// last extent of each stripe. A lane counts extents within its stripes; an extent that
// runs over a stripe boundary was counted on both sides, once too often.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/extent.hpp"

namespace sluice {

struct Stripe {
  std::uint64_t index = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t end() const { return offset + length; }
};

class Stripes {
 public:
  // `stripe_size` 0 or at least `image_size`: one stripe, the whole image.
  Stripes(std::uint64_t image_size, std::uint64_t stripe_size);

  std::uint64_t count() const { return edges_.size(); }
  std::uint64_t stripe_size() const { return stripe_size_; }

  // The next unclaimed stripe, from any thread; none once all are claimed.
  std::optional<Stripe> claim();

  // The kinds of the first and last extent of a stripe, from the lane that claimed it.
  void record_edges(std::uint64_t index, ExtentKind first, ExtentKind last);

  // Extents of `kind` counted twice because they continue over a stripe boundary.
  // Only once every lane has ended.
  std::uint64_t counted_twice(ExtentKind kind) const;

 private:
  struct Edges {
    ExtentKind first = ExtentKind::data;
    ExtentKind last = ExtentKind::data;
    bool recorded = false;
  };

  std::uint64_t size_;
  std::uint64_t stripe_size_;
  std::atomic<std::uint64_t> next_{0};
  std::vector<Edges> edges_;  // each element written by the one lane that claimed it
};

}  // namespace sluice
