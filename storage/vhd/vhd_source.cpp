#include "storage/vhd/vhd_source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/file_extents.hpp"
#include "storage/vhd/vhd_bytes.hpp"

namespace sluice {

namespace {

constexpr std::size_t no_member = static_cast<std::size_t>(-1);

// A stretch of the requested range that lives contiguously in one member (or nowhere).
struct Piece {
  std::uint64_t from = 0;  // virtual bytes
  std::uint64_t to = 0;
  std::size_t member = no_member;
  std::uint64_t physical = 0;
};

class PieceList {
 public:
  PieceList(std::uint64_t from, std::uint64_t to) : from_(from), to_(to) {}

  // `sectors` virtual sectors from `vsector`, held by `member` from byte `physical`.
  void add(std::uint64_t vsector, std::uint64_t sectors, std::size_t member, std::uint64_t physical) {
    const std::uint64_t start = vsector * vhd::sector;
    const std::uint64_t from = std::max(start, from_);
    const std::uint64_t to = std::min(start + sectors * vhd::sector, to_);
    if (from >= to) return;
    physical += from - start;
    if (!pieces_.empty()) {
      Piece& last = pieces_.back();
      if (last.to == from && last.member == member &&
          (member == no_member || last.physical + (last.to - last.from) == physical)) {
        last.to = to;
        return;
      }
    }
    pieces_.push_back({from, to, member, physical});
  }
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  std::uint64_t from_, to_;
  std::vector<Piece> pieces_;
};

// Maps `count` sectors from `vsector` through members[index...] into `out`.
void resolve(const vhd::Chain& chain, std::size_t index, std::uint64_t vsector, std::uint64_t count,
             PieceList& out) {
  while (count > 0) {
    if (index == chain.members.size()) {
      out.add(vsector, count, no_member, 0);
      return;
    }
    const vhd::Member& m = chain.members[index];
    const vhd::Member::Run run = m.run_at(vsector, count);
    if (run.physical)
      out.add(vsector, run.sectors, index, *run.physical);
    else
      resolve(chain, index + 1, vsector, run.sectors, out);
    vsector += run.sectors;
    count -= run.sectors;
  }
}

}  // namespace

Result<std::unique_ptr<VhdSource>> VhdSource::open(executor ex, const std::string& path,
                                                   const vhd::ChainOptions& options) {
  auto chain = vhd::open_chain(path, options);
  if (!chain) return tl::unexpected(chain.error());
  return std::unique_ptr<VhdSource>(new VhdSource(ex, std::move(*chain)));
}

VhdSource::VhdSource(executor ex, vhd::Chain chain) : chain_(std::move(chain)), ring_(FileRing::of(ex)) {}

bool VhdSource::is_plain_fixed() const { return chain_.members.size() == 1 && !chain_.members.front().header; }

SourceTraits VhdSource::traits() const {
  SourceTraits traits;
  traits.serves_lanes = true;
  traits.gives_file_slices = is_plain_fixed();
  return traits;
}

std::optional<FileSlice> VhdSource::file_slice(std::uint64_t offset, std::uint64_t length) const {
  if (!is_plain_fixed()) return std::nullopt;
  return FileSlice{chain_.members.front().fd.get(), offset, length};
}

awaitable<Result<std::vector<Extent>>> VhdSource::extents(std::uint64_t offset, std::uint64_t length_hint) {
  const vhd::Member& top = chain_.members.front();
  if (is_plain_fixed()) co_return file_extents(top.fd.get(), size(), offset, length_hint);
  const std::uint64_t grain = top.block_size();
  const std::uint64_t want_end = offset + std::max<std::uint64_t>(length_hint, 1);
  std::vector<Extent> out;
  std::uint64_t at = offset;
  while (at < size() && (at < want_end || out.empty())) {
    const std::uint64_t end = std::min((at / grain + 1) * grain, size());
    bool data = false;
    for (const vhd::Member& m : chain_.members) data = data || m.holds_any(at, end);
    const ExtentKind kind = data ? ExtentKind::data : ExtentKind::hole;
    if (!out.empty() && out.back().kind == kind)
      out.back().length += end - at;
    else
      out.push_back({at, end - at, kind});
    at = end;
  }
  co_return out;
}

awaitable<Status> VhdSource::read(std::uint64_t offset, std::span<std::byte> into) {
  const std::uint64_t end = offset + into.size();
  PieceList pieces(offset, end);
  const std::uint64_t first = offset / vhd::sector;
  resolve(chain_, 0, first, (end + vhd::sector - 1) / vhd::sector - first, pieces);
  // Not a co_await inside ?: (g++ 12 can destroy such a temporary twice).
  const executor here = co_await asio::this_coro::executor;
  FileRing& ring = in_lanes_ ? FileRing::of(here) : ring_;
  for (const Piece& p : pieces.pieces()) {
    std::span<std::byte> part = into.subspan(p.from - offset, p.to - p.from);
    if (p.member == no_member) {
      std::memset(part.data(), 0, part.size());
      continue;
    }
    const vhd::Member& m = chain_.members[p.member];
    Status ok = co_await ring_read_exactly(ring, m.fd.get(), p.physical, part, !in_lanes_);
    if (!ok) co_return fail(ok.error().code, m.path + ": " + ok.error().message);
  }
  co_return Status{};
}

awaitable<Status> VhdSource::close() {
  for (const vhd::Member& m : chain_.members) {
    struct stat st {};
    if (::fstat(m.fd.get(), &st) != 0) co_return fail(errno_code(errno), m.path + ": " + errno_code(errno).message());
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) < m.file_size)
      co_return fail(std::errc::io_error, m.path + ": the VHD shrank from " + std::to_string(m.file_size) + " to " +
                                              std::to_string(st.st_size) + " bytes during the copy");
  }
  co_return Status{};
}

}  // namespace sluice
