// FileHandles: Asio keeps one io_uring operation in flight per I/O object and
// direction, so N concurrent reads of one file need N file objects. This lends out
// asio::random_access_file objects, each on its own dup() of one descriptor, creating
// them on demand; at most `depth` ever exist.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <asio/random_access_file.hpp>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class FileHandles {
 public:
  class Lease {
   public:
    Lease(FileHandles& owner, std::unique_ptr<asio::random_access_file> file)
        : owner_(&owner), file_(std::move(file)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease() {
      if (file_) owner_->idle_.push_back(std::move(file_));
    }
    asio::random_access_file& operator*() const { return *file_; }
    asio::random_access_file* operator->() const { return file_.get(); }

   private:
    FileHandles* owner_;
    std::unique_ptr<asio::random_access_file> file_;
  };

  FileHandles(executor ex, int fd) : ex_(ex), fd_(fd) {}

  Result<Lease> lend();

 private:
  executor ex_;
  int fd_;  // not owned
  std::vector<std::unique_ptr<asio::random_access_file>> idle_;
};

// Reads exactly into.size() bytes at `offset`; a short read is the source shrinking.
awaitable<Status> read_exactly(asio::random_access_file& file, std::uint64_t offset,
                               std::span<std::byte> into);

// Writes all of `bytes` at `offset`.
awaitable<Status> write_all(asio::random_access_file& file, std::uint64_t offset,
                            std::span<const std::byte> bytes);

}  // namespace sluice
