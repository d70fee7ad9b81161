// Image: a disk image as a server sees it, random access in both directions.
//
// Source and Destination are the two halves a copy drives front to back; a server
// (NBD) instead answers whatever its clients ask, in any order and many at once, on
// one shared image. The operations mirror NBD's commands because those are the
// general vocabulary of block storage: read, write, zero (with or without keeping the
// range allocated, or only if that is cheap), trim, flush, cache, extents.
//
// Every operation may be called concurrently; the caller owns the spans until the
// operation completes. Ranges lie within size() (the caller checks).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/block_sizes.hpp"
#include "engine/error.hpp"
#include "engine/extent.hpp"

namespace sluice {

struct ImageTraits {
  bool read_only = false;
  // trim() really deallocates (a hole is punched). When false, trim() is a no-op.
  bool can_trim = false;
  // extents() reports holes from the storage's own map (not everything as data).
  bool can_extents = false;
  // A flush on one handle covers every completed write to the image, whoever made it
  // (one shared page cache / device cache): several connections may share the image.
  bool flush_covers_all = false;
  bool rotational = false;
  BlockSizes block_sizes{};
};

struct ZeroRequest {
  // The range may become a hole (NBD: no NO_HOLE flag); otherwise it stays allocated.
  bool may_trim = true;
  // Only if zeroing is cheaper than writing zeros; otherwise fail at once with ENOTSUP
  // and change nothing (NBD's FAST_ZERO).
  bool fast_only = false;
  // The zeros reach stable storage before completion (NBD's FUA).
  bool durable = false;
};

class Image {
 public:
  virtual ~Image() = default;

  virtual std::uint64_t size() const = 0;
  virtual ImageTraits traits() const = 0;
  virtual std::string describe() const = 0;

  virtual awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) = 0;
  // With `durable` the data reaches stable storage before completion (FUA).
  virtual awaitable<Status> write(std::uint64_t offset, std::span<const std::byte> data,
                                  bool durable) = 0;
  virtual awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroRequest request) = 0;
  // Advisory: the range's contents no longer matter and may be deallocated.
  virtual awaitable<Status> trim(std::uint64_t offset, std::uint64_t length, bool durable) = 0;
  // Every write completed so far reaches stable storage.
  virtual awaitable<Status> flush() = 0;
  // Advisory: the range will be read soon.
  virtual awaitable<Status> cache(std::uint64_t offset, std::uint64_t length) = 0;
  // The allocation map of [offset, offset + length): contiguous extents starting at
  // `offset`, at least one, ending no later than min(offset + length, size()).
  virtual awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length) = 0;

  // Whether read_into_pipe() may be used: the bytes live in a file the kernel can
  // splice from, so a server can send them without copying them into memory.
  virtual bool reads_into_pipes() const { return false; }
  // Moves [offset, offset + length) into an empty pipe (its write end) large enough to
  // hold it. A failure here is a read error; the pipe may then hold part of the range.
  virtual awaitable<Status> read_into_pipe(std::uint64_t offset, std::size_t /*length*/, int /*pipe*/) {
    co_return fail_at("reading into a pipe", offset, std::make_error_code(std::errc::operation_not_supported));
  }
  // Whether write_from_pipe() may be used: the image is a file the kernel can splice
  // into through its page cache, so a server can store a payload it spliced from the
  // socket without copying it through memory first.
  virtual bool writes_from_pipes() const { return false; }
  // Moves the `length` bytes waiting in a pipe (its read end) to [offset, offset +
  // length); with `durable` they reach stable storage before completion. After a
  // failure the pipe may still hold some of them.
  virtual awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t /*length*/, int /*pipe*/,
                                            bool /*durable*/) {
    co_return fail_at("writing from a pipe", offset, std::make_error_code(std::errc::operation_not_supported));
  }
};

}  // namespace sluice
