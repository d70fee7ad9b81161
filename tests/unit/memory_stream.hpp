// Test helper: a Stream in memory. What is sent is recorded frame by frame (so tests
// can check that a header sat directly in front of its payload); what is read comes
// from a prepared byte vector in pieces of a chosen size, so readers meet headers
// split across reads. It can be told to drop the connection after some bytes.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "engine/net/stream.hpp"

namespace sluice::test {

class MemoryStream final : public Stream {
 public:
  struct SentFrame {
    std::size_t head = 0;
    std::size_t body = 0;
    bool contiguous = false;
    const std::byte* body_data = nullptr;
  };

  explicit MemoryStream(std::vector<std::byte> input = {}, std::size_t read_piece = 4096)
      : input_(std::move(input)), read_piece_(read_piece) {}

  awaitable<Status> read_exactly(std::span<std::byte> into) override {
    std::size_t done = 0;
    while (done < into.size()) {
      auto n = co_await read_some(into.subspan(done));
      if (!n) co_return tl::unexpected(n.error());
      if (*n == 0) co_return fail(std::errc::connection_reset, "memory stream ended");
      done += *n;
    }
    co_return Status{};
  }

  awaitable<Result<std::size_t>> read_some(std::span<std::byte> into) override {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);  // be a real suspension
    if (aborted) co_return fail(std::errc::operation_canceled, "memory stream aborted");
    if (drop_after && read_ >= *drop_after)
      co_return fail(std::errc::connection_reset, "receiving from memory: Connection reset by peer");
    std::size_t limit = input_.size() - read_;
    if (drop_after) limit = std::min(limit, *drop_after - read_);
    std::size_t n = std::min({into.size(), read_piece_, limit});
    if (n > 0) std::memcpy(into.data(), input_.data() + read_, n);
    read_ += n;
    co_return n;
  }

  awaitable<Status> close() override {
    closed = true;
    co_return Status{};
  }
  void abort() override { aborted = true; }
  StreamStats stats() const override { return stats_; }
  bool is_tls() const override { return false; }
  std::string peer() const override { return "memory"; }

  std::vector<std::byte> sent;
  std::vector<SentFrame> frames;
  bool closed = false;
  bool aborted = false;
  std::optional<std::size_t> drop_after;  // reads fail once this many bytes were read

 protected:
  awaitable<Status> transmit(std::span<const Pending> batch, bool) override {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    if (aborted) co_return fail(std::errc::broken_pipe, "memory stream aborted");
    ++stats_.socket_writes;
    for (const Pending& p : batch) {
      const Frame& f = p.frame;
      frames.push_back(SentFrame{f.head.size(), f.body.size(),
                                 !f.head.empty() && f.head.data() + f.head.size() == f.body.data(),
                                 f.body.data()});
      sent.insert(sent.end(), f.head.begin(), f.head.end());
      sent.insert(sent.end(), f.body.begin(), f.body.end());
      stats_.bytes_sent += f.size();
    }
    co_return Status{};
  }
  std::size_t batch_bytes() const override { return 1u << 20; }
  std::size_t batch_frames() const override { return 64; }

 private:
  std::vector<std::byte> input_;
  std::size_t read_piece_;
  std::size_t read_ = 0;
  StreamStats stats_;
};

}  // namespace sluice::test
