// ExtentAligner: makes a stream of extents safe for a destination with a minimum
// block size. A zero or hole range whose ends are not on the alignment gives its
// ragged edges to data (reading zeros is always correct, writing an unaligned request
// is not), and neighbours of the same kind merge, so every boundary it emits lies on
// the alignment or at the image's end.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/extent.hpp"

namespace sluice {

class ExtentAligner {
 public:
  ExtentAligner(std::uint64_t alignment, std::uint64_t image_size)
      : alignment_(alignment), size_(image_size) {}

  // Feeds the next extent (contiguous with the previous one); returns what became final.
  std::vector<Extent> push(const Extent& extent);
  // Everything still held back, once the map is complete.
  std::vector<Extent> finish();

 private:
  void add(Extent piece, std::vector<Extent>& out);
  std::uint64_t round_up(std::uint64_t v) const;
  std::uint64_t round_down(std::uint64_t v) const;

  std::uint64_t alignment_;
  std::uint64_t size_;
  std::optional<Extent> pending_;
};

}  // namespace sluice
