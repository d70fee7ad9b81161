// An allocator whose containers grow without zeroing what they add: for buffers that
// are written in full right after they grow (ciphertext sealed in place), where
// zero-filling first would be one more pass over every byte.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace sluice {

template <typename T>
class UninitializedAllocator : public std::allocator<T> {
 public:
  static_assert(std::is_trivially_default_constructible_v<T>);
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}

  // Value-initialisation (what resize() asks for) becomes default-initialisation.
  template <typename U>
  void construct(U* place) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(place)) U;
  }
  template <typename U, typename... Args>
  void construct(U* place, Args&&... args) {
    ::new (static_cast<void*>(place)) U(std::forward<Args>(args)...);
  }
};

}  // namespace sluice
