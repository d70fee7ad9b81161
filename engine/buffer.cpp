#include "engine/buffer.hpp"

#include <cassert>
#include <cstdlib>
#include <new>
#include <utility>

#include "engine/buffer_pool.hpp"

namespace sluice {

namespace detail {
void release(Block* block) noexcept {
  assert(block->references > 0);
  if (--block->references != 0) return;
  if (block->pool != nullptr) {
    block->pool->give_back(block);
  } else {
    if (!block->lender) std::free(block->memory);
    delete block;  // a lender goes with its last block
  }
}
}  // namespace detail

Buffer::Buffer(detail::Block* block, std::size_t begin, std::size_t end, std::size_t headroom)
    : block_(block), begin_(begin), end_(end), headroom_(headroom) {
  ++block_->references;
}

Buffer::Buffer(Buffer&& other) noexcept
    : block_(std::exchange(other.block_, nullptr)),
      begin_(other.begin_),
      end_(other.end_),
      headroom_(other.headroom_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    block_ = std::exchange(other.block_, nullptr);
    begin_ = other.begin_;
    end_ = other.end_;
    headroom_ = other.headroom_;
  }
  return *this;
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() noexcept {
  if (block_ != nullptr) detail::release(std::exchange(block_, nullptr));
}

Buffer Buffer::allocate(std::size_t size, std::size_t headroom, std::size_t alignment) {
  std::size_t total = headroom + size;
  total = (total + alignment - 1) / alignment * alignment;  // aligned_alloc wants a multiple
  if (total == 0) total = alignment;
  void* memory = std::aligned_alloc(alignment, total);
  if (memory == nullptr) throw std::bad_alloc();
  auto* block = new detail::Block{static_cast<std::byte*>(memory), headroom, size, 0, nullptr, nullptr};
  return Buffer(block, headroom, headroom + size, headroom);
}

Buffer Buffer::borrow(std::span<const std::byte> memory, std::shared_ptr<const void> lender) {
  // const_cast: a Block holds writable memory; writable() and prefix() refuse these
  // bytes (a lender, no headroom), so they are only ever read.
  auto* block = new detail::Block{const_cast<std::byte*>(memory.data()), 0, memory.size(), 0, nullptr,
                                  std::move(lender)};
  return Buffer(block, 0, memory.size(), 0);
}

std::span<std::byte> Buffer::writable() {
  if (block_ == nullptr) return {};
  assert(!block_->lender && "a borrowed buffer is read-only");
  return {block_->memory + begin_, end_ - begin_};
}

std::span<std::byte> Buffer::prefix(std::size_t n) {
  assert(n <= headroom_);
  return {block_->memory + begin_ - n, n};
}

std::span<const std::byte> Buffer::with_prefix(std::size_t n) const {
  assert(n <= headroom_);
  return {block_->memory + begin_ - n, n + size()};
}

Buffer Buffer::share(std::size_t offset, std::size_t length, std::size_t headroom) const {
  assert(offset + length <= size());
  // Never promise more than the bytes that physically exist in front of the window.
  std::size_t available = block_->lender ? 0 : begin_ + offset;
  if (headroom > available) headroom = available;
  return Buffer(block_, begin_ + offset, begin_ + offset + length, headroom);
}

void Buffer::truncate(std::size_t length) {
  assert(length <= size());
  end_ = begin_ + length;
}

}  // namespace sluice
