#include "engine/mapped_scan.hpp"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace sluice {

namespace {

// The scan in progress on this thread, if any: where SIGBUS jumps back to.
thread_local sigjmp_buf* scan_in_progress = nullptr;

void on_sigbus(int signal, siginfo_t*, void*) {
  if (scan_in_progress != nullptr) siglongjmp(*scan_in_progress, 1);
  // Not ours: die of it as if there were no handler.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, nullptr);
  });
}

// mark_zero_chunks, returning false if a page could not be read. Its own frame holds
// nothing with a destructor, so jumping out of it on SIGBUS skips no cleanup.
bool mark_zero_chunks_guarded(std::span<const std::byte> bytes, std::uint64_t base, std::size_t granularity,
                              std::span<std::uint8_t> flags) {
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {
    scan_in_progress = nullptr;
    return false;
  }
  scan_in_progress = &jump;
  mark_zero_chunks(bytes, base, granularity, flags);
  scan_in_progress = nullptr;
  return true;
}

// The measured scan, under the same guard: its frame holds only trivially destructible
// values. The second pass marks into `flags` again, with the same result.
bool measure_zero_chunks_guarded(std::span<const std::byte> bytes, std::uint64_t base, std::size_t granularity,
                                 std::span<std::uint8_t> flags, std::span<std::byte> scratch, ScanCost& cost) {
  using clock = std::chrono::steady_clock;
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {
    scan_in_progress = nullptr;
    return false;
  }
  scan_in_progress = &jump;
  const auto started = clock::now();
  mark_zero_chunks(bytes, base, granularity, flags);
  const auto first_done = clock::now();
  mark_zero_chunks(bytes, base, granularity, flags);
  const auto second_done = clock::now();
  std::memcpy(scratch.data(), bytes.data(), bytes.size());
  const auto copied = clock::now();
  scan_in_progress = nullptr;
  const double pages = std::max(1.0, static_cast<double>(bytes.size()) / 4096.0);
  const auto ns = [](clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); };
  cost.touch_ns_per_page = (ns(first_done - started) - ns(second_done - first_done)) / pages;
  cost.copy_ns_per_page = ns(copied - second_done) / pages;
  return true;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack the name
#endif

}  // namespace

awaitable<Result<MappedRange>> MappedRange::map(FileRing& ring, int fd, std::uint64_t offset, std::size_t length) {
  install_sigbus_handler();
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  const auto delta = static_cast<std::size_t>(offset - start);
  const std::size_t mapped = delta + length;
  void* mapping = ::mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (mapping == MAP_FAILED) co_return fail_at("mapping the source", offset, errno_code(errno));
  MappedRange range(mapping, mapped, delta, length, offset);
  // Reads what is not cached yet on a kernel worker, not on this thread. WILLNEED first
  // starts reading the whole range in large requests; populating alone faults the
  // pages in a readahead window at a time (128 KiB), waiting for each. Advice only: a
  // failure of it changes nothing. EFAULT: part of the range is past the end of the
  // file now.
  co_await ring.madvise(mapping, mapped, MADV_WILLNEED);
  int populated = co_await ring.madvise(mapping, mapped, MADV_POPULATE_READ);
  if (populated == -EFAULT)
    co_return fail_source_shrank(offset);
  if (populated < 0 && populated != -EINVAL && populated != -EOPNOTSUPP)
    co_return fail_at("read", offset, errno_code(-populated));
  co_return range;
}

MappedRange::MappedRange(MappedRange&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_(other.mapped_),
      delta_(other.delta_),
      length_(other.length_),
      offset_(other.offset_) {}

MappedRange::~MappedRange() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_);
}

Result<std::vector<Run>> MappedRange::zero_runs(std::uint64_t base, std::size_t granularity) const {
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(mapping_) + delta_, length_);
  std::vector<std::uint8_t> flags(zero_chunk_count(bytes.size(), base, granularity));
  if (!mark_zero_chunks_guarded(bytes, base, granularity, flags))
    return fail_source_shrank(offset_);
  return runs_from_zero_chunks(bytes.size(), base, granularity, flags);
}

Result<std::vector<Run>> MappedRange::zero_runs_measured(std::uint64_t base, std::size_t granularity,
                                                         std::span<std::byte> scratch, ScanCost& cost) const {
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(mapping_) + delta_, length_);
  std::vector<std::uint8_t> flags(zero_chunk_count(bytes.size(), base, granularity));
  if (!measure_zero_chunks_guarded(bytes, base, granularity, flags, scratch.first(bytes.size()), cost))
    return fail_source_shrank(offset_);
  return runs_from_zero_chunks(bytes.size(), base, granularity, flags);
}

}  // namespace sluice
