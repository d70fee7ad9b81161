// Zero detection without copying: a file range is mapped read-only and scanned in
// place, so data that then goes out by splice never passes through a buffer.
//
// Page faults would read cold data on the event loop's thread, so the caller first
// populates the mapping through the ring (MADV_POPULATE_READ runs on an io-wq worker)
// and then scans. A file that shrank under the mapping raises SIGBUS when the scan
// touches the lost pages; the scan catches that and reports it instead of crashing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/uring/file_ring.hpp"
#include "engine/zero_scan.hpp"

namespace sluice {

// What scanning a mapped range cost, in nanoseconds per 4 KiB page. `touch`: the first
// pass beyond a second pass over the same pages, which is what mapping them costs (a
// TLB fill per page; where the hypervisor shadows the guest's page tables, a trap per
// page). `copy`: copying the pages into a buffer, which is what reading them through
// the page cache instead would have cost.
struct ScanCost {
  double touch_ns_per_page = 0;
  double copy_ns_per_page = 0;
};

class MappedRange {
 public:
  // Maps [offset, offset + length) of `fd` read-only; populates it through `ring`.
  static awaitable<Result<MappedRange>> map(FileRing& ring, int fd, std::uint64_t offset, std::size_t length);

  MappedRange(MappedRange&& other) noexcept;
  MappedRange& operator=(MappedRange&&) = delete;
  ~MappedRange();

  // The mapped bytes: [offset, offset + length) of the file.
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(mapping_) + delta_, length_};
  }

  // scan_zero_runs over the mapped bytes; fails if a page could not be read (the file
  // shrank while it was being copied).
  Result<std::vector<Run>> zero_runs(std::uint64_t base, std::size_t granularity) const;

  // zero_runs, and what it cost (ScanCost): scans twice and copies the range into
  // `scratch`, which must hold the whole range. For the first few scans of a copy only.
  Result<std::vector<Run>> zero_runs_measured(std::uint64_t base, std::size_t granularity,
                                              std::span<std::byte> scratch, ScanCost& cost) const;

 private:
  MappedRange(void* mapping, std::size_t mapped, std::size_t delta, std::size_t length, std::uint64_t offset)
      : mapping_(mapping), mapped_(mapped), delta_(delta), length_(length), offset_(offset) {}

  void* mapping_ = nullptr;
  std::size_t mapped_ = 0;  // bytes mapped, from the page boundary below `offset`
  std::size_t delta_ = 0;   // `offset` minus that boundary
  std::size_t length_ = 0;
  std::uint64_t offset_ = 0;
};

}  // namespace sluice
