#include "engine/mapped_scan_probe.hpp"

#include <algorithm>

namespace sluice {

namespace {

double median_of(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

}  // namespace

std::span<std::byte> MappedScanProbe::scratch(std::size_t length) {
  if (scratch_.size() < length) scratch_.resize(length);
  return scratch_;
}

void MappedScanProbe::add(const ScanCost& cost) {
  if (!measuring()) return;  // scans started while measuring may finish after the verdict
  costs_.push_back(cost);
  if (measuring()) return;
  std::vector<double> touch;
  std::vector<double> copy;
  for (const ScanCost& c : costs_) {
    touch.push_back(c.touch_ns_per_page);
    copy.push_back(c.copy_ns_per_page);
  }
  median_ = ScanCost{median_of(touch), median_of(copy)};
  dear_ = dear_ratio_ <= 0 || median_.touch_ns_per_page >= dear_ratio_ * median_.copy_ns_per_page;
  scratch_ = {};
}

}  // namespace sluice
