#include "storage/vhd/vhd_chain.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/file_facts.hpp"
#include "storage/vhd/parent_search.hpp"
#include "storage/vhd/vhd_bat.hpp"
#include "storage/vhd/vhd_bytes.hpp"

namespace sluice::vhd {

namespace {

tl::unexpected<Error> bad(const std::string& path, std::string what) {
  return fail(std::errc::invalid_argument, path + ": " + std::move(what));
}

Status read_at(int fd, const std::string& path, std::uint64_t offset, std::span<std::byte> into,
               const char* what) {
  std::size_t done = 0;
  while (done < into.size()) {
    ssize_t n = ::pread(fd, into.data() + done, into.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return fail(errno_code(errno), path + ": reading " + what + " at offset " + std::to_string(offset + done) +
                                         ": " + errno_code(errno).message());
    if (n == 0)
      return bad(path, std::string(what) + " at offset " + std::to_string(offset + done) +
                           " is cut off by the end of the file (truncated?)");
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Result<Footer> read_trailing_footer(int fd, const std::string& path, std::uint64_t file_size) {
  if (file_size < footer_size)
    return bad(path, std::to_string(file_size) + " bytes is too short for a VHD: its footer alone is 512 bytes");
  const std::uint64_t at = file_size - footer_size;
  std::vector<std::byte> bytes(footer_size);
  if (Status ok = read_at(fd, path, at, bytes, "the VHD footer"); !ok) return tl::unexpected(ok.error());
  auto footer = parse_footer(bytes);
  if (footer) return footer;
  std::string hint;
  std::vector<std::byte> first(footer_size);
  if (at > 0 && read_at(fd, path, 0, first, "the VHD footer copy") && parse_footer(first))
    hint = " (the footer's copy at offset 0 is intact: a truncated or damaged file)";
  return bad(path, "VHD footer at offset " + std::to_string(at) + ": " + footer.error().message + hint);
}

bool all_bytes(std::span<const std::uint8_t> bytes, std::uint8_t value, std::uint64_t bits) {
  // Only the first `bits` bits count; the bitmap's padding may hold anything.
  for (std::uint64_t i = 0; i < bits / 8; ++i)
    if (bytes[i] != value) return false;
  if (bits % 8 == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - bits % 8));
  return (bytes[bits / 8] & mask) == (value & mask);
}

Status read_dynamic(Member& m) {
  const std::string& path = m.path;
  const Footer& f = m.footer;
  const std::uint64_t data_end = m.file_size - footer_size;
  if (f.data_offset < footer_size || f.data_offset > data_end || data_end - f.data_offset < header_size)
    return bad(path, "VHD footer at offset " + std::to_string(data_end) + ": the dynamic header offset " +
                         std::to_string(f.data_offset) + " lies outside the file's " +
                         std::to_string(m.file_size) + " bytes");
  std::vector<std::byte> bytes(header_size);
  if (Status ok = read_at(m.fd.get(), path, f.data_offset, bytes, "the dynamic header"); !ok) return ok;
  auto header = parse_header(bytes);
  if (!header)
    return bad(path, "dynamic header at offset " + std::to_string(f.data_offset) + ": " + header.error().message);
  m.header = *header;
  const Header& h = *m.header;
  const std::uint64_t used64 = (f.current_size + h.block_size - 1) / h.block_size;
  if (used64 > h.max_table_entries)
    return bad(path, "dynamic header at offset " + std::to_string(f.data_offset) + ": the BAT has " +
                         std::to_string(h.max_table_entries) + " entries, fewer than the " +
                         std::to_string(used64) + " blocks of a " + std::to_string(f.current_size) +
                         "-byte disk");
  const auto used = static_cast<std::uint32_t>(used64);
  const std::uint64_t table_bytes = (4ull * h.max_table_entries + sector - 1) / sector * sector;
  if (h.table_offset > data_end || data_end - h.table_offset < table_bytes)
    return bad(path, "BAT at offset " + std::to_string(h.table_offset) + ": its " +
                         std::to_string(h.max_table_entries) + " entries (" + std::to_string(table_bytes) +
                         " bytes) do not fit before the footer at offset " + std::to_string(data_end) +
                         " (an absurd table size, or a truncated file)");
  std::vector<std::byte> table(4ull * used);
  if (Status ok = read_at(m.fd.get(), path, h.table_offset, table, "the BAT"); !ok) return ok;
  m.bat = parse_bat(table, used);

  m.bitmap_bytes = (m.sectors_per_block() + 8 * sector - 1) / (8 * sector) * sector;
  BatLayout layout{h.table_offset, m.bitmap_bytes + h.block_size, data_end, {}};
  layout.metadata.push_back({0, footer_size, "the footer copy"});
  layout.metadata.push_back({f.data_offset, header_size, "the dynamic header"});
  layout.metadata.push_back({h.table_offset, table_bytes, "the BAT"});
  if (f.disk_type == DiskType::differencing)
    for (const ParentLocatorEntry& l : h.locators)
      if (l.platform_code != 0 && l.data_length > 0)
        layout.metadata.push_back({l.data_offset, l.data_length, "parent locator data"});
  if (Status ok = check_bat(m.bat, used, layout); !ok) return bad(path, ok.error().message);

  const std::size_t span = m.bitmap_span();
  std::vector<std::uint8_t> bitmap(span);
  m.block_state.assign(used, Member::absent);
  for (std::uint32_t b = 0; b < used; ++b) {
    if (m.bat[b] == unallocated) continue;
    ++m.allocated_blocks;
    const std::uint64_t at = std::uint64_t{m.bat[b]} * sector;
    if (Status ok = read_at(m.fd.get(), path, at, std::as_writable_bytes(std::span(bitmap)), "a sector bitmap");
        !ok)
      return ok;
    const std::uint64_t bits = std::min<std::uint64_t>(
        m.sectors_per_block(), (f.current_size - std::uint64_t{b} * h.block_size + sector - 1) / sector);
    if (all_bytes(bitmap, 0xff, bits)) {
      m.block_state[b] = Member::full;
    } else if (!all_bytes(bitmap, 0, bits)) {
      m.block_state[b] = static_cast<std::uint32_t>(m.bitmaps.size() / span);
      m.bitmaps.insert(m.bitmaps.end(), bitmap.begin(), bitmap.end());
    }
  }
  return {};
}

Result<Member> open_member(const std::string& path) {
  auto opened = open_image_file(path, O_RDONLY);
  if (!opened) return tl::unexpected(opened.error());
  auto info = inspect_image_file(opened->get(), path);
  if (!info) return tl::unexpected(info.error());
  Member m;
  m.path = path;
  m.fd = std::move(*opened);
  m.file_size = info->size;
  auto footer = read_trailing_footer(m.fd.get(), path, m.file_size);
  if (!footer) return tl::unexpected(footer.error());
  m.footer = *footer;
  if (m.footer.disk_type == DiskType::fixed) {
    if (m.footer.current_size > m.file_size - footer_size)
      return bad(path, "a fixed VHD of " + std::to_string(m.footer.current_size) + " bytes needs " +
                           std::to_string(m.footer.current_size + footer_size) + " bytes, but the file has " +
                           std::to_string(m.file_size) + " (truncated?)");
    return m;
  }
  if (Status ok = read_dynamic(m); !ok) return tl::unexpected(ok.error());
  return m;
}

}  // namespace

Member::Run Member::run_at(std::uint64_t vsector, std::uint64_t max_count) const {
  const std::uint64_t size_sectors = (size() + sector - 1) / sector;
  if (vsector >= size_sectors) return {std::nullopt, max_count};
  max_count = std::min(max_count, size_sectors - vsector);
  if (!header) return {vsector * sector, max_count};
  const std::uint64_t spb = sectors_per_block();
  const std::uint64_t b = vsector / spb;
  const std::uint64_t j = vsector % spb;
  const std::uint64_t n = std::min(max_count, spb - j);
  const std::uint64_t physical = std::uint64_t{bat[b]} * sector + bitmap_bytes + j * sector;
  const std::uint32_t state = block_state[b];
  if (state == absent) return {std::nullopt, n};
  if (state == full) return {physical, n};
  const std::uint8_t* bits = bitmaps.data() + std::size_t{state} * bitmap_span();
  auto present = [&](std::uint64_t k) { return (bits[k / 8] & (0x80u >> (k % 8))) != 0; };
  const bool first = present(j);
  std::uint64_t count = 1;
  while (count < n && present(j + count) == first) ++count;
  if (!first) return {std::nullopt, count};
  return {physical, count};
}

bool Member::holds_any(std::uint64_t from, std::uint64_t to) const {
  to = std::min(to, size());
  if (from >= to) return false;
  if (!header) return true;
  const std::uint64_t bs = block_size();
  for (std::uint64_t b = from / bs; b * bs < to; ++b)
    if (block_state[b] != absent) return true;
  return false;
}

Result<Chain> open_chain(const std::string& path, const ChainOptions& options) {
  Chain chain;
  std::vector<std::pair<dev_t, ino_t>> seen;
  std::string next = path;
  for (;;) {
    auto member = open_member(next);
    if (!member) return tl::unexpected(member.error());
    struct stat st {};
    ::fstat(member->fd.get(), &st);
    seen.emplace_back(st.st_dev, st.st_ino);
    const bool differencing = member->footer.disk_type == DiskType::differencing;
    chain.members.push_back(std::move(*member));
    if (!differencing) break;
    const Member& child = chain.members.back();
    auto parent = find_parent(child, options.search_dirs);
    if (!parent) return tl::unexpected(parent.error());
    struct stat pst {};
    if (::stat(parent->c_str(), &pst) == 0 &&
        std::find(seen.begin(), seen.end(), std::pair(pst.st_dev, pst.st_ino)) != seen.end())
      return bad(child.path, "the chain loops: its parent " + *parent + " is already in the chain");
    next = *parent;
  }
  return chain;
}

}  // namespace sluice::vhd
