// Whether zero detection should keep scanning the source through a mapping, judged
// from what the first scans of a copy cost.
//
// Scanning in place saves the copy into a buffer that a buffered read makes, and pays
// for mapping every page instead. On most hosts mapping a page is the cheaper of the
// two by far; on a VM whose hypervisor shadows its page tables, the first touch of
// each mapped page traps, costs more than copying it, and a copy runs slower in place
// than buffered (docs/benchmarks.md, section "Zero detection through a mapping").
// The probe measures both costs on the copy's own data and
// says when to give way.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/mapped_scan.hpp"

namespace sluice {

class MappedScanProbe {
 public:
  // Scans measured before the verdict: enough that one preempted scan cannot decide.
  static constexpr std::size_t samples_needed = 8;

  // `dear_ratio`: touching is dear when it costs at least this many times the copy
  // (1: when it costs more than the copy it saves; 0: always, for tests).
  explicit MappedScanProbe(double dear_ratio = 1.0) : dear_ratio_(dear_ratio) {}

  // True until samples_needed scans have been measured.
  bool measuring() const { return costs_.size() < samples_needed; }

  // Room for the copy a measured scan times, `length` bytes; held only while measuring.
  std::span<std::byte> scratch(std::size_t length);

  void add(const ScanCost& cost);

  // The verdict, once measured: scan in place no more, read into buffers instead.
  bool mapping_is_dear() const { return dear_; }

  // The medians the verdict was taken on (zero before it).
  const ScanCost& median() const { return median_; }

 private:
  double dear_ratio_;
  std::vector<ScanCost> costs_;
  std::vector<std::byte> scratch_;
  ScanCost median_;
  bool dear_ = false;
};

}  // namespace sluice
