// A raw image written to a regular file or a block device through the event loop.
//
// A regular file is created or truncated and sized to the source, so it is known to
// read as zeros and holes stay holes. A block device keeps its contents, so zero
// ranges are zeroed (ZeroingLadder), as are those of a file opened with keep_contents.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "engine/asio.hpp"
#include "engine/credits.hpp"
#include "engine/destination.hpp"
#include "engine/unique_fd.hpp"
#include "engine/uring/file_ring.hpp"
#include "engine/uring/pipe_pool.hpp"
#include "storage/file_options.hpp"
#include "storage/page_cache_writer.hpp"
#include "storage/zeroing_ladder.hpp"

namespace sluice {

class FileDestination final : public Destination {
 public:
  // Opens (creating it if needed) `path` to receive `size` bytes.
  static Result<std::unique_ptr<FileDestination>> open(executor ex, const std::string& path,
                                                       std::uint64_t size, const FileOptions& options);

  DestinationTraits traits() const override;
  std::string describe() const override { return path_; }
  awaitable<Status> write(std::uint64_t offset, Buffer data) override;
  awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t length, int pipe) override;
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice) override;
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) override;
  awaitable<Status> flush() override;
  awaitable<Status> finish() override;

  bool is_block_device() const { return block_device_; }

 private:
  FileDestination(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd, bool block_device,
                  std::uint64_t writeback_window, bool known_zero);
  awaitable<Status> write_behind(std::uint64_t offset, std::uint64_t length);
  awaitable<Status> splice_from_file(Pipe& pipe, FileSlice slice, std::uint64_t offset);
  // pipe -> file through the page cache, in its turn (page_cache_).
  awaitable<Status> splice_into_file(std::uint64_t offset, std::size_t length, int pipe);
  // Writes through O_DIRECT when asked for and aligned, else through the page cache.
  awaitable<Status> write_span(std::uint64_t offset, std::span<const std::byte> bytes);

  std::string path_;
  UniqueFd fd_;
  UniqueFd direct_fd_;
  bool block_device_;
  bool known_zero_;
  ZeroingLadder zeroing_;
  FileRing& ring_;
  std::uint64_t writeback_window_;
  PipePool pipes_;  // for write_file(), one per write in flight
  // Writes through a regular file's page cache, one turn at a time: the kernel
  // serialises them on the inode lock anyway, and with several in flight io-wq ran one
  // worker per write, all but one spinning on that lock (up to a third of the copy's
  // CPU in rwsem_spin_on_owner). Writes that wait for a turn go as one chain. A block
  // device's buffered writes take no such lock.
  PageCacheWriter page_cache_;
  struct Range {
    std::uint64_t offset;
    std::uint64_t length;
    std::uint64_t written;  // bytes written within it (holes skipped inside are not)
  };
  std::deque<Range> dirty_;  // written, writeback started, not yet known to be on disk
  std::uint64_t dirty_bytes_ = 0;
  // Written since writeback was last started, not yet handed to it: the span they
  // cover and how many bytes they are.
  std::uint64_t unkicked_begin_ = 0;
  std::uint64_t unkicked_end_ = 0;
  std::uint64_t unkicked_bytes_ = 0;
};

}  // namespace sluice
