#include "engine/extent_aligner.hpp"

#include <algorithm>

namespace sluice {

std::uint64_t ExtentAligner::round_up(std::uint64_t v) const {
  if (v >= size_) return size_;  // the image's end counts as aligned
  return std::min(size_, (v + alignment_ - 1) / alignment_ * alignment_);
}

std::uint64_t ExtentAligner::round_down(std::uint64_t v) const {
  if (v >= size_) return size_;
  return v / alignment_ * alignment_;
}

std::vector<Extent> ExtentAligner::push(const Extent& extent) {
  std::vector<Extent> out;
  if (extent.length == 0) return out;
  if (extent.kind == ExtentKind::data || alignment_ <= 1) {
    add(extent, out);
    return out;
  }
  const std::uint64_t inner_begin = round_up(extent.offset);
  const std::uint64_t inner_end = round_down(extent.end());
  if (inner_begin >= inner_end) {
    add(Extent{extent.offset, extent.length, ExtentKind::data}, out);
    return out;
  }
  if (inner_begin > extent.offset)
    add(Extent{extent.offset, inner_begin - extent.offset, ExtentKind::data}, out);
  add(Extent{inner_begin, inner_end - inner_begin, extent.kind}, out);
  if (extent.end() > inner_end)
    add(Extent{inner_end, extent.end() - inner_end, ExtentKind::data}, out);
  return out;
}

void ExtentAligner::add(Extent piece, std::vector<Extent>& out) {
  if (pending_ && pending_->kind == piece.kind && pending_->end() == piece.offset) {
    pending_->length += piece.length;
    return;
  }
  if (pending_) out.push_back(*pending_);
  pending_ = piece;
}

std::vector<Extent> ExtentAligner::finish() {
  std::vector<Extent> out;
  if (pending_) out.push_back(*pending_);
  pending_.reset();
  return out;
}

}  // namespace sluice
