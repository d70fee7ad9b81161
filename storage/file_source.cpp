#include "storage/file_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "storage/file_extents.hpp"
#include "storage/file_facts.hpp"

namespace sluice {

namespace {
constexpr std::uint64_t direct_alignment = 4096;
}

Result<std::unique_ptr<FileSource>> FileSource::open(executor ex, const std::string& path,
                                                     const FileOptions& options) {
  auto opened = open_image_file(path, O_RDONLY);
  if (!opened) return tl::unexpected(opened.error());
  UniqueFd fd = std::move(*opened);
  auto info = inspect_image_file(fd.get(), path);
  if (!info) return tl::unexpected(info.error());
  UniqueFd direct;
  if (options.direct) {
    direct = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
    if (!direct)
      return fail(errno_code(errno), path + ": cannot open with O_DIRECT: " + errno_code(errno).message());
  }
  return std::unique_ptr<FileSource>(
      new FileSource(ex, path, std::move(fd), std::move(direct), info->size, info->block_device));
}

FileSource::FileSource(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd,
                       std::uint64_t size, bool block_device)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      direct_fd_(std::move(direct_fd)),
      size_(size),
      block_device_(block_device),
      ring_(FileRing::of(ex)) {}

SourceTraits FileSource::traits() const {
  SourceTraits traits;
  // Keep O_DIRECT requests aligned; the unaligned tail goes through the page cache.
  if (direct_fd_) traits.block_sizes = BlockSizes{1, static_cast<std::uint32_t>(direct_alignment), 32u << 20};
  traits.serves_lanes = true;
  traits.gives_file_slices = true;  // the image's bytes lie at the same offsets in the file
  return traits;
}

awaitable<Result<std::vector<Extent>>> FileSource::extents(std::uint64_t offset,
                                                           std::uint64_t length_hint) {
  // A file that shrank would show its lost tail as a hole and copy as zeros.
  if (Status same = check_size(); !same) co_return tl::unexpected(same.error());
  co_return file_extents(fd_.get(), size_, offset, length_hint);
}

awaitable<Status> FileSource::close() { co_return check_size(); }

Status FileSource::check_size() const {
  if (block_device_) return Status{};
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return fail(errno_code(errno), path_ + ": " + errno_code(errno).message());
  if (static_cast<std::uint64_t>(st.st_size) < size_)
    return fail(std::errc::io_error, path_ + ": the source shrank from " + std::to_string(size_) + " to " +
                                         std::to_string(st.st_size) + " bytes during the copy");
  return Status{};
}

awaitable<Status> FileSource::read(std::uint64_t offset, std::span<std::byte> into) {
  bool aligned = offset % direct_alignment == 0 && into.size() % direct_alignment == 0 &&
                 reinterpret_cast<std::uintptr_t>(into.data()) % direct_alignment == 0;
  // One lane: page-cache reads go to the kernel's workers, so another core copies
  // while this loop keeps the pipeline fed. Lanes: each lane's own thread copies, and
  // the hand-off to a worker is saved (docs/benchmarks.md, section "Lanes").
  // O_DIRECT reads are asynchronous by nature.
  // Not a co_await inside ?: (g++ 12 can destroy such a temporary twice).
  const executor here = co_await asio::this_coro::executor;
  FileRing& ring = in_lanes_ ? FileRing::of(here) : ring_;
  if (direct_fd_ && aligned) co_return co_await ring_read_exactly(ring, direct_fd_.get(), offset, into, false);
  co_return co_await ring_read_exactly(ring, fd_.get(), offset, into, !in_lanes_);
}

std::uint64_t FileSource::allocated_bytes() const {
  struct stat st {};
  if (block_device_ || ::fstat(fd_.get(), &st) != 0) return size_;
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

}  // namespace sluice
