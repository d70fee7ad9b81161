// In-memory endpoints for engine unit tests. Their completions are delayed by random
// amounts so requests finish out of order, and the sink checks that every payload is
// still intact when its write completes: a buffer reused early shows up as corruption.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "engine/destination.hpp"
#include "engine/source.hpp"

namespace sluice::test {

inline awaitable<void> random_delay(std::mt19937& rng, int max_us) {
  asio::steady_timer t(co_await asio::this_coro::executor,
                       std::chrono::microseconds(static_cast<int>(rng() % static_cast<unsigned>(max_us + 1))));
  co_await t.async_wait(use_nothrow);
}

// The extents of `map` that meet [offset, offset + length), the first cut to start at
// `offset`, as Source::extents answers.
inline std::vector<Extent> extents_within(const std::vector<Extent>& map, std::uint64_t offset, std::uint64_t length) {
  std::vector<Extent> out;
  for (Extent e : map) {
    if (e.end() <= offset || e.offset >= offset + length) continue;
    if (e.offset < offset) {
      e.length -= offset - e.offset;
      e.offset = offset;
    }
    out.push_back(e);
  }
  return out;
}

class MemorySource final : public Source {
 public:
  MemorySource(std::vector<std::byte> image, std::vector<Extent> map)
      : image_(std::move(image)), map_(std::move(map)) {}

  std::uint64_t size() const override { return image_.size(); }
  std::string describe() const override { return "memory"; }
  SourceTraits traits() const override {
    SourceTraits traits;
    traits.block_sizes = sizes;
    traits.round_trip = far;
    traits.gives_file_slices = slice_fd >= 0;
    return traits;
  }

  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length) override {
    co_return extents_within(map_, offset, length);
  }

  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override {
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    if (read_delay.count() > 0) {
      asio::steady_timer slow(co_await asio::this_coro::executor, read_delay);
      co_await slow.async_wait(use_nothrow);
    } else {
      co_await random_delay(rng, 200);
    }
    --in_flight;
    if (fail_read_at && offset <= *fail_read_at && *fail_read_at < offset + into.size())
      co_return fail_at("read", offset, std::make_error_code(std::errc::io_error));
    if (aborted && fail_reads_once_aborted)
      co_return fail_at("read", offset, std::make_error_code(std::errc::connection_reset));
    std::memcpy(into.data(), image_.data() + offset, into.size());
    co_return Status{};
  }

  // With a descriptor holding the same bytes: offers them as file slices.
  std::optional<FileSlice> file_slice(std::uint64_t offset, std::uint64_t length) const override {
    return FileSlice{slice_fd, offset, length};
  }

  void abort() override { aborted = true; }

  BlockSizes sizes{};
  std::chrono::microseconds far{0};  // nonzero: a source a round trip away
  // Nonzero: every read takes exactly this long (reads overlap whenever they may).
  std::chrono::microseconds read_delay{0};
  int slice_fd = -1;
  std::optional<std::uint64_t> fail_read_at;
  // Reads still running when the copy aborts the source fail, and not as cancelled:
  // a server that dies when its connection is cut.
  bool fail_reads_once_aborted = false;
  bool aborted = false;
  std::size_t in_flight = 0;
  std::size_t max_in_flight = 0;
  std::mt19937 rng{7};

 private:
  std::vector<std::byte> image_;
  std::vector<Extent> map_;
};

class CheckingSink : public Destination {
 public:
  explicit CheckingSink(std::uint64_t size) : image(size, std::byte{0xEE}) {}

  DestinationTraits traits() const override { return traits_; }
  std::string describe() const override { return "checking sink"; }

  awaitable<Status> write(std::uint64_t offset, Buffer data) override {
    std::vector<std::byte> expected(data.bytes().begin(), data.bytes().end());
    co_return co_await complete_write(offset, std::move(data), std::move(expected));
  }

  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode) override {
    begin(offset, length);
    co_await random_delay(rng, 100);
    std::fill_n(image.begin() + static_cast<std::ptrdiff_t>(offset), length, std::byte{0});
    zeroed += length;
    co_return end(offset, length);
  }

  awaitable<Status> flush() override {
    CHECK(in_flight == 0);  // a flush covers completed writes only
    flushed = true;
    co_return Status{};
  }
  awaitable<Status> finish() override {
    finished = true;
    co_return Status{};
  }
  void abort() override { aborted = true; }

  DestinationTraits traits_{};
  std::optional<std::uint64_t> fail_write_at;
  std::vector<std::byte> image;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> requests;  // in issue order
  std::size_t in_flight = 0, max_in_flight = 0;
  std::uint64_t completed_bytes = 0, zeroed = 0;
  std::uint64_t largest_write = 0;  // bytes of the largest data write
  std::size_t corruptions = 0;
  bool flushed = false, finished = false, aborted = false;
  std::mt19937 rng{11};
  // Nonzero: every data write takes exactly this long (writes pile up behind reads).
  std::chrono::milliseconds write_delay{0};

 protected:
  awaitable<Status> complete_write(std::uint64_t offset, Buffer data, std::vector<std::byte> expected) {
    begin(offset, expected.size());
    largest_write = std::max<std::uint64_t>(largest_write, expected.size());
    if (write_delay.count() > 0) {
      asio::steady_timer slow(co_await asio::this_coro::executor, write_delay);
      co_await slow.async_wait(use_nothrow);
    } else {
      co_await random_delay(rng, 300);
    }
    // The payload must be exactly what was handed over: nobody may have reused it.
    if (std::memcmp(data.bytes().data(), expected.data(), expected.size()) != 0) ++corruptions;
    std::memcpy(image.data() + offset, data.bytes().data(), expected.size());
    co_return end(offset, expected.size());
  }

  void begin(std::uint64_t offset, std::uint64_t length) {
    requests.emplace_back(offset, length);
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
  }

  Status end(std::uint64_t offset, std::uint64_t length) {
    --in_flight;
    if (fail_write_at && offset <= *fail_write_at && *fail_write_at < offset + length)
      return fail_at("write", offset, std::make_error_code(std::errc::no_space_on_device));
    completed_bytes += length;
    return Status{};
  }
};

// The bug the field hit: the sink lets go of the buffer before its write completes
// (as a reader refilling one shared buffer would), then "sends" from the memory.
class EarlyReleaseSink final : public CheckingSink {
 public:
  using CheckingSink::CheckingSink;
  awaitable<Status> write(std::uint64_t offset, Buffer data) override {
    std::vector<std::byte> expected(data.bytes().begin(), data.bytes().end());
    const std::byte* memory = data.bytes().data();
    data = Buffer{};  // returned to the pool too early
    begin(offset, expected.size());
    // Hold the "write" until the pool has handed the block to a later read (the next
    // request takes it at once), or a while has passed: a fixed random delay let a
    // busy machine's timers fire in an order where no reuse was seen at all.
    for (int i = 0; i < 400 && std::memcmp(memory, expected.data(), expected.size()) == 0; ++i)
      co_await random_delay(rng, 100);
    if (std::memcmp(memory, expected.data(), expected.size()) != 0) ++corruptions;
    std::memcpy(image.data() + offset, memory, expected.size());
    co_return end(offset, expected.size());
  }
};

// Takes the bytes and lets go of the buffer at once, as the NBD client does once they
// are in the kernel, then holds the write as a server answering later would.
class SendingSink final : public CheckingSink {
 public:
  explicit SendingSink(std::uint64_t size) : CheckingSink(size) { traits_.releases_buffers_when_sent = true; }
  awaitable<Status> write(std::uint64_t offset, Buffer data) override {
    const std::size_t length = data.size();
    begin(offset, length);
    largest_write = std::max<std::uint64_t>(largest_write, length);
    std::memcpy(image.data() + offset, data.bytes().data(), length);
    data = Buffer{};  // sent
    if (write_delay.count() > 0) {  // the answer
      asio::steady_timer slow(co_await asio::this_coro::executor, write_delay);
      co_await slow.async_wait(use_nothrow);
    } else {
      co_await random_delay(rng, 300);
    }
    co_return end(offset, length);
  }
};

// A patterned image with the given data extents; everything else is a hole.
inline std::vector<std::byte> patterned(std::uint64_t size, const std::vector<Extent>& map, unsigned seed = 1) {
  std::vector<std::byte> image(size);
  std::mt19937 rng(seed);
  for (const Extent& e : map)
    if (e.kind == ExtentKind::data)
      for (std::uint64_t i = e.offset; i < e.end(); ++i) image[i] = std::byte(rng() | 1);
  return image;
}

}  // namespace sluice::test
