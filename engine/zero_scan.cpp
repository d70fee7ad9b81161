#include "engine/zero_scan.hpp"

#include <algorithm>
#include <cstring>

namespace sluice {

bool is_all_zero(std::span<const std::byte> bytes) {
  // Check a short head by hand, then let memcmp compare the span against itself shifted
  // by the head: if the head is zero and every byte equals the one `head` before it,
  // all are zero. glibc's memcmp is vectorised, and random data exits on the first word.
  constexpr std::size_t head = 16;
  std::size_t n = bytes.size();
  const std::byte* p = bytes.data();
  std::size_t first = std::min(n, head);
  for (std::size_t i = 0; i < first; ++i)
    if (p[i] != std::byte{0}) return false;
  if (n <= head) return true;
  return std::memcmp(p, p + head, n - head) == 0;
}

std::size_t zero_chunk_count(std::size_t size, std::uint64_t base, std::size_t granularity) {
  if (size == 0) return 0;
  return static_cast<std::size_t>((base + size - 1) / granularity - base / granularity + 1);
}

void mark_zero_chunks(std::span<const std::byte> bytes, std::uint64_t base, std::size_t granularity,
                      std::span<std::uint8_t> flags) {
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < bytes.size() && i < flags.size(); ++i) {
    std::size_t to_boundary = granularity - static_cast<std::size_t>((base + pos) % granularity);
    std::size_t len = std::min(to_boundary, bytes.size() - pos);
    flags[i] = is_all_zero(bytes.subspan(pos, len)) ? 1 : 0;
    pos += len;
  }
}

std::vector<Run> runs_from_zero_chunks(std::size_t size, std::uint64_t base, std::size_t granularity,
                                       std::span<const std::uint8_t> flags) {
  std::vector<Run> runs;
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < size && i < flags.size(); ++i) {
    std::size_t to_boundary = granularity - static_cast<std::size_t>((base + pos) % granularity);
    std::size_t len = std::min(to_boundary, size - pos);
    const bool zero = flags[i] != 0;
    if (!runs.empty() && runs.back().zero == zero)
      runs.back().length += len;
    else
      runs.push_back(Run{pos, len, zero});
    pos += len;
  }
  return runs;
}

std::vector<Run> scan_zero_runs(std::span<const std::byte> bytes, std::uint64_t base,
                                std::size_t granularity) {
  std::vector<std::uint8_t> flags(zero_chunk_count(bytes.size(), base, granularity));
  mark_zero_chunks(bytes, base, granularity, flags);
  return runs_from_zero_chunks(bytes.size(), base, granularity, flags);
}

}  // namespace sluice
