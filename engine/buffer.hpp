// Buffer: the owned unit of data that flows between stages.
//
// A Buffer is a move-only handle on a window of an aligned Block. The block keeps
// `headroom` bytes in front of the first window so an encoder can write its protocol
// header directly before the payload (one contiguous span for one TLS record, one
// iovec for one send). Windows of one block can be shared explicitly (zero detection
// splits a block into data runs); the block goes back to its pool only when the last
// handle is gone, which by construction is after the last write that used it.
//
// Single-threaded by design: the reference count is a plain integer, as a block never
// leaves the event-loop thread that owns its pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace sluice {

class BufferPool;

namespace detail {
struct Block {
  std::byte* memory = nullptr;  // aligned allocation: headroom, then capacity
  std::size_t headroom = 0;
  std::size_t capacity = 0;
  std::uint32_t references = 0;
  BufferPool* pool = nullptr;  // null: freed when the last handle goes
  // Set for memory lent by someone else (Buffer::borrow): released, not freed, and
  // read-only, so no window has headroom to write a header into.
  std::shared_ptr<const void> lender;
};
void release(Block* block) noexcept;
}  // namespace detail

class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  // A buffer of its own, not from a pool (replies, scratch space, tests).
  static Buffer allocate(std::size_t size, std::size_t headroom = 0, std::size_t alignment = 4096);

  // A read-only window on memory `lender` keeps alive (a mapping of the source file),
  // held until the last handle on it goes. Nothing may be written into it: it has no
  // writable() bytes and no headroom.
  static Buffer borrow(std::span<const std::byte> memory, std::shared_ptr<const void> lender);

  // The window, to read (send it, scan it, write it out).
  std::span<const std::byte> bytes() const {
    if (block_ == nullptr) return {};  // a default-constructed (or moved-from) buffer
    return {block_->memory + begin_, end_ - begin_};
  }
  // The window, to fill: only through a handle its holder may change, and never on
  // borrowed memory.
  std::span<std::byte> writable();
  std::size_t size() const { return end_ - begin_; }
  bool empty() const { return block_ == nullptr || end_ == begin_; }
  explicit operator bool() const { return block_ != nullptr; }

  // Writable bytes directly in front of the window: the block's headroom for a window
  // at its start, or bytes of a neighbouring run nobody will send (see share()).
  std::size_t headroom() const { return headroom_; }
  // The `n` bytes just before the window, to write a header into.
  std::span<std::byte> prefix(std::size_t n);
  // prefix(n) and the window as one span, to send.
  std::span<const std::byte> with_prefix(std::size_t n) const;

  // Another handle on [offset, offset + length) of this window. `headroom` is how many
  // bytes before the new window the caller guarantees are free for a header.
  Buffer share(std::size_t offset, std::size_t length, std::size_t headroom = 0) const;

  // Shrink the window to its first `length` bytes (a short read at the end of a file).
  void truncate(std::size_t length);

  // Number of handles on the underlying block (tests use it to prove ownership).
  std::uint32_t references() const { return block_ ? block_->references : 0; }

 private:
  friend class BufferPool;
  Buffer(detail::Block* block, std::size_t begin, std::size_t end, std::size_t headroom);
  void reset() noexcept;

  detail::Block* block_ = nullptr;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::size_t headroom_ = 0;
};

}  // namespace sluice
