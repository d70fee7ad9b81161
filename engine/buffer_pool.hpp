// BufferPool: a fixed number of aligned blocks, handed out as Buffers.
//
// The pool's size is the copy's in-flight bound: a stage that needs a block waits for
// one (Credits), and a block comes back only when its last Buffer handle is dropped,
// i.e. after the write that used it completed. Blocks are allocated on first use, so
// a small copy never touches depth x block-size bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/asio.hpp"
#include "engine/buffer.hpp"
#include "engine/credits.hpp"
#include "engine/error.hpp"

namespace sluice {

class BufferPool {
 public:
  static constexpr std::size_t default_headroom = 4096;  // keeps payloads O_DIRECT-aligned
  static constexpr std::size_t alignment = 4096;

  BufferPool(executor ex, std::size_t count, std::size_t block_size,
             std::size_t headroom = default_headroom);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool();

  // A buffer of block_size() bytes with headroom() bytes free in front of it.
  awaitable<Result<Buffer>> acquire();

  // Fails current and future acquire() calls; used to stop a pipeline.
  void close() { credits_.close(); }

  std::size_t count() const { return credits_.total(); }
  std::size_t block_size() const { return block_size_; }
  std::size_t headroom() const { return headroom_; }
  std::size_t in_use() const { return credits_.in_use(); }
  std::size_t high_water() const { return credits_.high_water(); }
  std::size_t allocated() const { return blocks_.size(); }

 private:
  friend void detail::release(detail::Block*) noexcept;
  void give_back(detail::Block* block) noexcept;

  Credits credits_;
  std::size_t block_size_;
  std::size_t headroom_;
  std::vector<std::unique_ptr<detail::Block, void (*)(detail::Block*)>> blocks_;
  std::vector<detail::Block*> free_;
};

}  // namespace sluice
