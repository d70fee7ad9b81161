// A raw image in a regular file or on a block device, read through the event loop.
#pragma once

#include <memory>
#include <string>

#include "engine/asio.hpp"
#include "engine/source.hpp"
#include "engine/unique_fd.hpp"
#include "engine/uring/file_ring.hpp"
#include "storage/file_options.hpp"

namespace sluice {

class FileSource final : public Source {
 public:
  static Result<std::unique_ptr<FileSource>> open(executor ex, const std::string& path,
                                                  const FileOptions& options);

  std::uint64_t size() const override { return size_; }
  std::string describe() const override { return path_; }
  SourceTraits traits() const override;
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset,
                                                  std::uint64_t length_hint) override;
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override;
  // The image's bytes lie at the same offsets in the (buffered) file.
  std::optional<FileSlice> file_slice(std::uint64_t offset, std::uint64_t length) const override {
    return FileSlice{fd_.get(), offset, length};
  }
  // Reads go through the ring of the loop that calls, on that loop's own thread.
  void serve_lanes() override { in_lanes_ = true; }
  // Fails if the file shrank while it was being read.
  awaitable<Status> close() override;

  bool is_block_device() const { return block_device_; }
  // Bytes the filesystem has allocated to the image (the whole size for a device).
  std::uint64_t allocated_bytes() const;

 private:
  FileSource(executor ex, std::string path, UniqueFd fd, UniqueFd direct_fd, std::uint64_t size,
             bool block_device);
  Status check_size() const;

  std::string path_;
  UniqueFd fd_;
  UniqueFd direct_fd_;  // only with FileOptions::direct
  std::uint64_t size_;
  bool block_device_;
  FileRing& ring_;  // the opening loop's, for a copy in one lane
  bool in_lanes_ = false;
};

}  // namespace sluice
