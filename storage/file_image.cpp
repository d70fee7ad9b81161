#include "storage/file_image.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "engine/buffer.hpp"
#include "storage/file_extents.hpp"
#include "storage/file_facts.hpp"

namespace sluice {

namespace {

constexpr std::uint32_t direct_alignment = 4096;
constexpr std::uint32_t max_request = 32u << 20;

// Whether punching holes works here, without touching a byte of the image: a punch
// beyond the end of file changes nothing on filesystems that support it and fails on
// those that do not.
bool punch_works(int fd, std::uint64_t size) {
  auto beyond = static_cast<off_t>((size + direct_alignment - 1) / direct_alignment * direct_alignment);
  return ::fallocate(fd, fallocate_modes(ZeroingRung::punch_hole).front(), beyond, direct_alignment) == 0;
}

Result<UniqueFd> duplicate(const std::string& path, int fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  return copy;
}

}  // namespace

Result<std::unique_ptr<FileImage>> FileImage::open(executor ex, const std::string& path,
                                                   const FileImageOptions& options) {
  const int mode = options.read_only ? O_RDONLY : O_RDWR;
  Result<UniqueFd> opened = options.shared_fd >= 0 ? duplicate(path, options.shared_fd) : open_image_file(path, mode);
  if (!opened) {
    Error error = opened.error();
    if (!options.read_only && (error.code == std::errc::permission_denied ||
                               error.code == std::errc::read_only_file_system))
      error.message += " (export it read-only with --read-only)";
    return tl::unexpected(std::move(error));
  }
  UniqueFd fd = std::move(*opened);
  auto info = inspect_image_file(fd.get(), path);
  if (!info) return tl::unexpected(info.error());
  UniqueFd direct;
  if (options.direct) {
    direct = UniqueFd(::open(path.c_str(), mode | O_CLOEXEC | O_DIRECT));
    if (!direct)
      return fail(errno_code(errno), path + ": cannot open with O_DIRECT: " + errno_code(errno).message());
  }
  return std::unique_ptr<FileImage>(new FileImage(ex, path, std::move(fd), std::move(direct), *info, options));
}

FileImage::FileImage(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd, const FileFacts& facts,
                     const FileImageOptions& options)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      direct_fd_(std::move(direct_fd)),
      size_(facts.size),
      block_device_(facts.block_device),
      memory_backed_(facts.memory_backed),
      zeroing_(block_device_ ? FileKind::block_device : FileKind::regular),
      ring_(FileRing::of(ex)),
      slots_(ex, std::max<std::size_t>(options.max_in_flight, 1)),
      page_cache_(ex, ring_, fd_.get(), block_device_ ? std::max<std::size_t>(options.max_in_flight, 1) : 1) {
  traits_.read_only = options.read_only;
  traits_.can_extents = !block_device_;
  traits_.can_trim = !options.read_only && !block_device_ && punch_works(fd_.get(), size_);
  // Every descriptor of the image shares the kernel's page cache for it (and a block
  // device's own cache): a write is visible to all once it completed, and fdatasync on
  // any descriptor makes every completed write durable, whichever descriptor (or NBD
  // connection) made it. O_DIRECT writes bypass the page cache but are complete on the
  // device when they complete, and fdatasync flushes the device's cache for them too.
  traits_.flush_covers_all = true;
  traits_.block_sizes = direct_fd_ ? BlockSizes{direct_alignment, direct_alignment, max_request}
                                   : BlockSizes{1, 4096, max_request};
}

int FileImage::descriptor_for(std::uint64_t offset, std::size_t size, const void* memory) const {
  bool aligned = offset % direct_alignment == 0 && size % direct_alignment == 0 &&
                 reinterpret_cast<std::uintptr_t>(memory) % direct_alignment == 0;
  return direct_fd_ && aligned ? direct_fd_.get() : fd_.get();
}

awaitable<Status> FileImage::read(std::uint64_t offset, std::span<std::byte> into) {
  if (Status got = co_await slots_.acquire(); !got) co_return got;
  CreditHeld held{slots_};
  int fd = descriptor_for(offset, into.size(), into.data());
  co_return co_await ring_read_exactly(ring_, fd, offset, into, fd == fd_.get());
}

awaitable<Status> FileImage::read_into_pipe(std::uint64_t offset, std::size_t length, int pipe) {
  if (Status got = co_await slots_.acquire(); !got) co_return got;
  CreditHeld held{slots_};
  // Always the buffered descriptor: splicing goes through the page cache.
  co_return co_await splice_file_to_pipe(ring_, fd_.get(), offset, pipe, length);
}

awaitable<Status> FileImage::write(std::uint64_t offset, std::span<const std::byte> data, bool durable) {
  if (traits_.read_only) co_return fail(std::errc::read_only_file_system, path_ + " is exported read-only");
  {
    if (Status got = co_await slots_.acquire(); !got) co_return got;
    CreditHeld held{slots_};
    int fd = descriptor_for(offset, data.size(), data.data());
    Status written;
    if (fd == fd_.get())
      written = co_await page_cache_.write(offset, data);
    else
      written = co_await ring_write_all(ring_, fd, offset, data, false);
    if (!written) co_return written;
  }
  if (durable) co_return co_await flush();
  co_return Status{};
}

awaitable<Status> FileImage::write_from_pipe(std::uint64_t offset, std::size_t length, int pipe, bool durable) {
  if (!writes_from_pipes())
    co_return fail_at("writing from a pipe", offset, std::make_error_code(std::errc::operation_not_supported));
  {
    if (Status got = co_await slots_.acquire(); !got) co_return got;
    CreditHeld held{slots_};
    if (Status got = co_await page_cache_.turns().acquire(); !got) co_return got;
    CreditHeld turn{page_cache_.turns()};
    // Not one conditional expression: g++ 12 destroys a co_await's temporary result
    // twice when the co_await is one arm of ?: (a double free on the first failure).
    Status written;
    if (memory_backed_)
      written = splice_pipe_to_memory_file(pipe, fd_.get(), offset, length);
    else
      written = co_await splice_pipe_to_file(ring_, pipe, fd_.get(), offset, length);
    if (!written) co_return written;
  }
  if (durable) co_return co_await flush();
  co_return Status{};
}

awaitable<Status> FileImage::zero(std::uint64_t offset, std::uint64_t length, ZeroRequest request) {
  if (traits_.read_only) co_return fail(std::errc::read_only_file_system, path_ + " is exported read-only");
  if (length == 0) co_return Status{};
  known_data_end_ = known_data_begin_;
  const ZeroingNeeds needs{.may_deallocate = request.may_trim, .fast_only = request.fast_only};
  Result<bool> zeroed = co_await zeroing_.zero(ring_, fd_.get(), offset, length, needs);
  if (!zeroed) co_return tl::unexpected(zeroed.error());
  if (!*zeroed) {
    // Zeros would have to be written: as slow as a write, which FAST_ZERO refuses.
    if (request.fast_only)
      co_return fail(std::errc::operation_not_supported,
                     "zeroing " + path_ + " is no faster than writing zeros");
    Status written = co_await write_zeros(offset, length, [this](std::uint64_t at, std::span<const std::byte> zeros) {
      return write(at, zeros, false);
    });
    if (!written) co_return written;
  }
  if (request.durable) co_return co_await flush();
  co_return Status{};
}

awaitable<Status> FileImage::trim(std::uint64_t offset, std::uint64_t length, bool durable) {
  if (traits_.read_only) co_return fail(std::errc::read_only_file_system, path_ + " is exported read-only");
  if (!traits_.can_trim || !zeroing_.punch_supported() || length == 0) co_return Status{};  // advisory
  known_data_end_ = known_data_begin_;
  Result<bool> punched = co_await zeroing_.punch(ring_, fd_.get(), offset, length);
  if (!punched) co_return tl::unexpected(punched.error());
  if (durable && *punched) co_return co_await flush();
  co_return Status{};
}

awaitable<Status> FileImage::flush() {
  if (traits_.read_only) co_return Status{};
  int ret = co_await ring_.fsync(fd_.get(), true);
  if (ret < 0) co_return fail(errno_code(-ret), path_ + ": flush failed: " + errno_code(-ret).message());
  co_return Status{};
}

awaitable<Status> FileImage::cache(std::uint64_t offset, std::uint64_t length) {
  // Readahead is a hint: a failure to start it changes nothing for later reads.
  (void)co_await ring_.fadvise(fd_.get(), offset, length, POSIX_FADV_WILLNEED);
  co_return Status{};
}

awaitable<Result<std::vector<Extent>>> FileImage::extents(std::uint64_t offset, std::uint64_t length) {
  const std::uint64_t end = std::min(size_, offset + std::min(length, size_ - std::min(offset, size_)));
  if (offset >= end) co_return std::vector<Extent>{};
  auto all_data = std::vector<Extent>{Extent{offset, end - offset, ExtentKind::data}};
  if (!traits_.can_extents) co_return all_data;
  if (offset >= known_data_begin_ && end <= known_data_end_) co_return all_data;
  // Most reads land in data: learn how far that data goes, once.
  off_t data = ::lseek(fd_.get(), static_cast<off_t>(offset), SEEK_DATA);
  if (data >= 0 && static_cast<std::uint64_t>(data) == offset) {
    off_t hole = ::lseek(fd_.get(), data, SEEK_HOLE);
    if (hole > data) {
      known_data_begin_ = offset;
      known_data_end_ = static_cast<std::uint64_t>(hole);
      if (end <= known_data_end_) co_return all_data;
    }
  }
  co_return file_extents(fd_.get(), size_, offset, end - offset);
}

}  // namespace sluice
