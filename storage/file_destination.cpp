#include "storage/file_destination.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "storage/file_facts.hpp"

namespace sluice {

namespace {
// Pipes for file -> file splices: as many as the default depth keeps writes in flight.
constexpr std::size_t pipes_per_destination = 8;
// Writeback is started for at least this many written bytes at a time (write_behind).
constexpr std::uint64_t writeback_kick = 2u << 20;
// A block device's buffered writes in flight at once: more than any copy's depth.
constexpr std::size_t block_device_writers = 256;
}  // namespace

namespace {
constexpr std::uint64_t direct_alignment = 4096;

// RLIMIT_FSIZE (`ulimit -f`): a write past it fails with EFBIG (SIGXFSZ is ignored by
// the CLI); known before the copy, it is refused before anything is touched.
Status fits_file_size_limit(const std::string& path, std::uint64_t size) {
  // Beyond off_t, ftruncate sees a negative size and says only "Invalid argument".
  if (size > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()))
    return fail(std::errc::file_too_large,
                path + ": the image (" + std::to_string(size) + " bytes) is larger than any file can be");
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || size <= limit.rlim_cur)
    return Status{};
  return fail(std::errc::file_too_large, path + ": the image (" + std::to_string(size) +
                                             " bytes) is larger than the file-size limit (ulimit -f: " +
                                             std::to_string(limit.rlim_cur) + " bytes)");
}
}  // namespace

Result<std::unique_ptr<FileDestination>> FileDestination::open(executor ex, const std::string& path,
                                                               std::uint64_t size,
                                                               const FileOptions& options) {
  auto opened = open_image_file(path, O_WRONLY | O_CREAT, 0644);
  if (!opened) return tl::unexpected(opened.error());
  UniqueFd fd = std::move(*opened);
  auto info = inspect_image_file(fd.get(), path);
  if (!info) return tl::unexpected(info.error());
  // Before the file is emptied below: a destination that cannot take O_DIRECT must
  // fail with its contents as they were.
  UniqueFd direct;
  if (options.direct) {
    direct = UniqueFd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT));
    if (!direct)
      return fail(errno_code(errno), path + ": cannot open with O_DIRECT: " + errno_code(errno).message());
  }
  if (info->block_device) {
    auto claimed = claim_block_device(path, O_WRONLY);
    if (!claimed) return tl::unexpected(claimed.error());
    fd = std::move(*claimed);
    if (info->size < size)
      return fail(std::errc::no_space_on_device,
                  path + ": the device (" + std::to_string(info->size) +
                      " bytes) is smaller than the source (" + std::to_string(size) + " bytes)");
  } else if (options.keep_contents) {
    if (Status fits = fits_file_size_limit(path, size); !fits) return tl::unexpected(fits.error());
    if (info->size < size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
      return fail(errno_code(errno), path + ": cannot extend to " + std::to_string(size) +
                                         " bytes: " + errno_code(errno).message());
  } else {
    // A size this file cannot have (over `ulimit -f`, or the filesystem's largest file)
    // must fail while the old contents are still there: check the limit, and grow the
    // file before emptying it.
    if (Status fits = fits_file_size_limit(path, size); !fits) return tl::unexpected(fits.error());
    if (info->size < size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
      return fail(errno_code(errno), path + ": cannot set the size to " + std::to_string(size) +
                                         " bytes: " + errno_code(errno).message());
    // Empty it and give it the source's size: it then reads as zeros, so zero ranges
    // need no writes and stay holes.
    if (::ftruncate(fd.get(), 0) != 0 || ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
      return fail(errno_code(errno), path + ": cannot set the size to " + std::to_string(size) +
                                         " bytes: " + errno_code(errno).message());
  }
  return std::unique_ptr<FileDestination>(
      new FileDestination(ex, path, std::move(fd), std::move(direct), info->block_device,
                          options.writeback_window, !info->block_device && !options.keep_contents));
}

FileDestination::FileDestination(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd,
                                 bool block_device, std::uint64_t writeback_window, bool known_zero)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      direct_fd_(std::move(direct_fd)),
      block_device_(block_device),
      known_zero_(known_zero),
      zeroing_(block_device ? FileKind::block_device : FileKind::regular),
      ring_(FileRing::of(ex)),
      writeback_window_(writeback_window),
      pipes_(ex, pipes_per_destination),
      page_cache_(ex, ring_, fd_.get(), block_device ? block_device_writers : 1) {}

DestinationTraits FileDestination::traits() const {
  DestinationTraits traits;
  traits.known_zero = known_zero_;
  traits.zero_is_cheap = true;
  // Short writes queued for a regular file's turn go out as one chain, so many may
  // wait at once. A block device's buffered writes each take a turn (and an io-wq
  // worker) of their own, so there the depth stays the bound.
  if (!block_device_) traits.writes_in_flight = FileRing::max_chain;
  // Not with O_DIRECT: splicing goes through the page cache. From a file source: file
  // -> pipe -> file inside the kernel, one copy instead of two (page-cache pages are
  // moved into the pipe, then copied once into the destination).
  traits.takes_pipes = !direct_fd_;
  traits.takes_file_slices = !direct_fd_;
  traits.file_slices_pay = traits.takes_file_slices;
  if (direct_fd_) traits.block_sizes = BlockSizes{1, static_cast<std::uint32_t>(direct_alignment), 32u << 20};
  return traits;
}

awaitable<Status> FileDestination::write_span(std::uint64_t offset, std::span<const std::byte> bytes) {
  bool aligned = offset % direct_alignment == 0 && bytes.size() % direct_alignment == 0 &&
                 reinterpret_cast<std::uintptr_t>(bytes.data()) % direct_alignment == 0;
  if (direct_fd_ && aligned) co_return co_await ring_write_all(ring_, direct_fd_.get(), offset, bytes, false);
  co_return co_await page_cache_.write(offset, bytes);
}

awaitable<Status> FileDestination::write(std::uint64_t offset, Buffer data) {
  // `data` lives in this frame until the write has completed.
  if (Status s = co_await write_span(offset, data.bytes()); !s) co_return s;
  if (writeback_window_ > 0 && !direct_fd_) co_return co_await write_behind(offset, data.size());
  co_return Status{};
}

awaitable<Status> FileDestination::splice_into_file(std::uint64_t offset, std::size_t length, int pipe) {
  if (Status s = co_await page_cache_.turns().acquire(); !s) co_return s;
  CreditHeld turn{page_cache_.turns()};
  co_return co_await splice_pipe_to_file(ring_, pipe, fd_.get(), offset, length);
}

awaitable<Status> FileDestination::write_from_pipe(std::uint64_t offset, std::size_t length, int pipe) {
  if (Status s = co_await splice_into_file(offset, length, pipe); !s) co_return s;
  if (writeback_window_ > 0) co_return co_await write_behind(offset, length);
  co_return Status{};
}

awaitable<Status> FileDestination::write_file(std::uint64_t offset, FileSlice slice) {
  auto pipe = co_await pipes_.acquire();
  if (!pipe) co_return tl::unexpected(pipe.error());
  Status status = co_await splice_from_file(**pipe, slice, offset);
  pipes_.release(*pipe, bool(status));
  if (!status) co_return status;
  if (writeback_window_ > 0) co_return co_await write_behind(offset, slice.length);
  co_return Status{};
}

awaitable<Status> FileDestination::splice_from_file(Pipe& pipe, FileSlice slice, std::uint64_t offset) {
  for (std::uint64_t done = 0; done < slice.length;) {
    const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(slice.length - done, pipe.capacity()));
    if (Status s = co_await splice_file_to_pipe(ring_, slice.fd, slice.offset + done, pipe.write_end(), chunk); !s)
      co_return s;
    if (Status s = co_await splice_into_file(offset + done, chunk, pipe.read_end()); !s) co_return s;
    done += chunk;
  }
  co_return Status{};
}

awaitable<Status> FileDestination::write_behind(std::uint64_t offset, std::uint64_t length) {
  // Errors here are only hints failing (a filesystem without sync_file_range); the
  // final flush still reports real write errors.
  //
  // Writeback starts once the writes since it last started add up to a request's worth,
  // over the span they cover. An image with scattered zero blocks becomes tens of
  // thousands of small writes with holes between them, and a sync_file_range for each
  // made that copy much slower (docs/benchmarks.md, section "Choosing the default
  // zero-detection granularity (--sparse)"). Writes of a request's size
  // still start it one by one.
  if (unkicked_bytes_ == 0) {
    unkicked_begin_ = offset;
    unkicked_end_ = offset + length;
  } else {
    unkicked_begin_ = std::min(unkicked_begin_, offset);
    unkicked_end_ = std::max(unkicked_end_, offset + length);
  }
  unkicked_bytes_ += length;
  if (unkicked_bytes_ < writeback_kick) co_return Status{};
  const Range kicked{unkicked_begin_, unkicked_end_ - unkicked_begin_, unkicked_bytes_};
  unkicked_bytes_ = 0;
  co_await ring_.sync_file_range(fd_.get(), kicked.offset, kicked.length, SYNC_FILE_RANGE_WRITE);
  dirty_.push_back(kicked);
  dirty_bytes_ += kicked.written;
  while (dirty_bytes_ > writeback_window_ && !dirty_.empty()) {
    Range oldest = dirty_.front();
    dirty_.pop_front();
    dirty_bytes_ -= oldest.written;
    co_await ring_.sync_file_range(fd_.get(), oldest.offset, oldest.length,
                                   SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    co_await ring_.fadvise(fd_.get(), oldest.offset, oldest.length, POSIX_FADV_DONTNEED);
  }
  co_return Status{};
}

awaitable<Status> FileDestination::zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) {
  const ZeroingNeeds needs{.may_deallocate = mode == ZeroMode::may_punch, .fast_only = false};
  Result<bool> zeroed = co_await zeroing_.zero(ring_, fd_.get(), offset, length, needs);
  if (!zeroed) co_return tl::unexpected(zeroed.error());
  if (*zeroed) co_return Status{};
  co_return co_await write_zeros(offset, length, [this](std::uint64_t at, std::span<const std::byte> zeros) {
    return write_span(at, zeros);
  });
}

awaitable<Status> FileDestination::flush() {
  int ret = co_await ring_.fsync(fd_.get(), true);
  if (ret < 0) co_return fail(errno_code(-ret), path_ + ": flush failed: " + errno_code(-ret).message());
  co_return Status{};
}

awaitable<Status> FileDestination::finish() {
  int fd = fd_.release();
  if (::close(fd) != 0)
    co_return fail(errno_code(errno), path_ + ": close failed: " + errno_code(errno).message());
  co_return Status{};
}

}  // namespace sluice
