// A VHD and its ancestors, opened and checked: every member's footer, header, BAT and
// sector bitmaps are read up front, so locating a virtual sector needs no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.hpp"
#include "engine/unique_fd.hpp"
#include "storage/vhd/vhd_footer.hpp"
#include "storage/vhd/vhd_header.hpp"

namespace sluice::vhd {

// One file of a chain.
struct Member {
  std::string path;
  UniqueFd fd;
  std::uint64_t file_size = 0;
  Footer footer;
  std::optional<Header> header;  // none for a fixed disk
  std::vector<std::uint32_t> bat;  // the used entries
  std::uint32_t allocated_blocks = 0;
  std::uint64_t bitmap_bytes = 0;  // as stored before each block's data (whole sectors)

  static constexpr std::uint32_t absent = 0xffffffff;  // nothing present in the block
  static constexpr std::uint32_t full = 0xfffffffe;    // every sector present
  // Per used block: absent, full, or the index of its bitmap in `bitmaps`.
  std::vector<std::uint32_t> block_state;
  std::vector<std::uint8_t> bitmaps;  // partial bitmaps, bitmap_span bytes each

  std::uint64_t size() const { return footer.current_size; }
  std::uint64_t block_size() const { return header ? header->block_size : 0; }
  std::uint64_t sectors_per_block() const { return block_size() / 512; }
  std::size_t bitmap_span() const { return static_cast<std::size_t>((sectors_per_block() + 7) / 8); }
  // From `vsector`, how many sectors (1 to max_count) this file holds contiguously,
  // or lacks, alike: where the first lies in the file (nullopt: not here) and the count.
  struct Run {
    std::optional<std::uint64_t> physical;
    std::uint64_t sectors = 0;
  };
  Run run_at(std::uint64_t vsector, std::uint64_t max_count) const;
  // True if any sector of [from, to) (bytes) is held by this file.
  bool holds_any(std::uint64_t from, std::uint64_t to) const;
};

struct Chain {
  std::vector<Member> members;  // the child first, then its parent, and so on

  std::uint64_t size() const { return members.front().size(); }
};

struct ChainOptions {
  std::vector<std::string> search_dirs;  // where parents are looked for, after the child's directory
};

// Opens `path` as a VHD and follows its parents. Every error names the file and the
// offset of the structure at fault.
Result<Chain> open_chain(const std::string& path, const ChainOptions& options);

}  // namespace sluice::vhd
