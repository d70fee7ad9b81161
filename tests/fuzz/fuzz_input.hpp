// Helpers shared by the libFuzzer targets: the input read as the byte stream a peer
// sends, a message at a time, and a check that stops the run when a decoder breaks one
// of its documented promises (a crash is then recorded with the input that caused it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>

#include "engine/error.hpp"

namespace sluice::fuzz {

class WireInput {
 public:
  WireInput(const std::uint8_t* data, std::size_t size)
      : bytes_(reinterpret_cast<const std::byte*>(data), size) {}

  // The next `n` bytes, or what is left when the peer stopped sending sooner.
  std::span<const std::byte> take(std::size_t n) {
    const std::size_t k = std::min(n, bytes_.size());
    auto out = bytes_.first(k);
    bytes_ = bytes_.subspan(k);
    return out;
  }
  // Exactly the next `n` bytes, or nothing when the input ends sooner (a reader that
  // needs them all then stops with the connection broken).
  std::optional<std::span<const std::byte>> take_exactly(std::size_t n) {
    if (bytes_.size() < n) return std::nullopt;
    return take(n);
  }
  // The next byte as a number, or `otherwise` at the end.
  unsigned take_byte(unsigned otherwise = 0) {
    auto b = take(1);
    return b.empty() ? otherwise : std::to_integer<unsigned>(b[0]);
  }
  std::span<const std::byte> rest() const { return bytes_; }
  bool empty() const { return bytes_.empty(); }

 private:
  std::span<const std::byte> bytes_;
};

inline std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

[[noreturn]] inline void broken_promise(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::abort();
}

// Whether a decoder accepted its input; a refusal must say why, since its message is
// what a user reads.
template <class T>
bool accepted(const Result<T>& result) {
  if (!result && result.error().message.empty()) broken_promise("a refusal without a message", __FILE__, __LINE__);
  return result.has_value();
}

}  // namespace sluice::fuzz

// A decoder's documented promise, checked on every input.
#define FUZZ_REQUIRE(condition) \
  ((condition) ? void(0) : ::sluice::fuzz::broken_promise(#condition, __FILE__, __LINE__))
