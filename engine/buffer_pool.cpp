#include "engine/buffer_pool.hpp"

#include <cassert>
#include <cstdlib>
#include <new>

namespace sluice {

namespace {
void free_block(detail::Block* block) {
  std::free(block->memory);
  delete block;
}
}  // namespace

BufferPool::BufferPool(executor ex, std::size_t count, std::size_t block_size,
                       std::size_t headroom)
    : credits_(ex, count), block_size_(block_size), headroom_(headroom) {
  assert(count > 0 && block_size > 0);
  assert(headroom % alignment == 0);
  blocks_.reserve(count);
  free_.reserve(count);
}

BufferPool::~BufferPool() {
  // A buffer outliving its pool is a lifetime bug in the caller: it would write into
  // freed memory on release. Catch it in debug builds.
  assert(in_use() == 0 && "buffer outlived its pool");
}

awaitable<Result<Buffer>> BufferPool::acquire() {
  if (auto got = co_await credits_.acquire(); !got) co_return tl::unexpected(got.error());
  detail::Block* block = nullptr;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    std::size_t total = (headroom_ + block_size_ + alignment - 1) / alignment * alignment;
    void* memory = std::aligned_alloc(alignment, total);
    if (memory == nullptr) {
      credits_.release();
      co_return fail(std::errc::not_enough_memory, "cannot allocate a transfer buffer");
    }
    block = new detail::Block{static_cast<std::byte*>(memory), headroom_, block_size_, 0, this, nullptr};
    blocks_.emplace_back(block, &free_block);
  }
  co_return Buffer(block, headroom_, headroom_ + block_size_, headroom_);
}

void BufferPool::give_back(detail::Block* block) noexcept {
  free_.push_back(block);
  credits_.release();
}

}  // namespace sluice
