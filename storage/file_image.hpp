// FileImage: a raw image in a regular file or on a block device, served for random
// access (the NBD server's exports). Everything goes through the event loop's
// FileRing: reads and writes (page-cache copies offloaded to the kernel's workers),
// flush, zero, trim and cache, so nothing blocks the loop.
#pragma once

#include <memory>
#include <string>

#include "engine/asio.hpp"
#include "engine/credits.hpp"
#include "engine/image.hpp"
#include "engine/unique_fd.hpp"
#include "engine/uring/file_ring.hpp"
#include "storage/file_facts.hpp"
#include "storage/page_cache_writer.hpp"
#include "storage/zeroing_ladder.hpp"

namespace sluice {

struct FileImageOptions {
  bool read_only = false;
  // O_DIRECT for the data path; requests must then be aligned to 4096 bytes, which the
  // image advertises as its minimum block size.
  bool direct = false;
  // Data operations in flight at once.
  std::size_t max_in_flight = 64;
  // An open descriptor of `path` to share (it is duplicated) instead of opening the
  // path again: a block device claimed with O_EXCL (claim_block_device), whose claim a
  // second open would collide with, and which the kernel requires for discards and
  // zeroing while it is claimed.
  int shared_fd = -1;
};

class FileImage final : public Image {
 public:
  static Result<std::unique_ptr<FileImage>> open(executor ex, const std::string& path,
                                                 const FileImageOptions& options);

  std::uint64_t size() const override { return size_; }
  ImageTraits traits() const override { return traits_; }
  std::string describe() const override { return path_; }

  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override;
  awaitable<Status> write(std::uint64_t offset, std::span<const std::byte> data, bool durable) override;
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroRequest request) override;
  awaitable<Status> trim(std::uint64_t offset, std::uint64_t length, bool durable) override;
  awaitable<Status> flush() override;
  awaitable<Status> cache(std::uint64_t offset, std::uint64_t length) override;
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length) override;
  bool reads_into_pipes() const override { return true; }
  awaitable<Status> read_into_pipe(std::uint64_t offset, std::size_t length, int pipe) override;
  // Not with O_DIRECT: those writes must bypass the page cache, which splicing fills.
  bool writes_from_pipes() const override { return !traits_.read_only && !direct_fd_; }
  awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t length, int pipe, bool durable) override;

  bool is_block_device() const { return block_device_; }

 private:
  FileImage(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd, const FileFacts& facts,
            const FileImageOptions& options);
  // The O_DIRECT descriptor for aligned requests when asked for, else the buffered one.
  int descriptor_for(std::uint64_t offset, std::size_t size, const void* memory) const;

  std::string path_;
  UniqueFd fd_;
  UniqueFd direct_fd_;
  std::uint64_t size_;
  bool block_device_;
  // On tmpfs or ramfs: pipes are spliced into it on the loop's thread
  // (splice_pipe_to_memory_file says why).
  bool memory_backed_;
  ZeroingLadder zeroing_;
  FileRing& ring_;
  ImageTraits traits_;
  Credits slots_;
  // Buffered writes to a regular file, one turn at a time. The kernel serialises them
  // on the file's inode lock anyway; with several in flight, io-wq ran one worker per
  // write and all but one spun on that lock, burning the CPU the copy needed (a third
  // of the writer's time in rwsem_spin_on_owner). Writes that wait for a turn go as one
  // chain. A block device's buffered writes take no such lock, so they run as many at
  // a time as slots_ allows.
  PageCacheWriter page_cache_;
  // A stretch known to be all data, from the last SEEK_DATA/SEEK_HOLE pair. Finding
  // the end of a data run costs time proportional to its length on some filesystems
  // (tmpfs walks its pages), so without this every read of a large allocated file
  // would pay for a walk to the next hole. Writes only turn holes into data; zero and
  // trim may punch holes, so they forget it.
  std::uint64_t known_data_begin_ = 0;
  std::uint64_t known_data_end_ = 0;
};

}  // namespace sluice
