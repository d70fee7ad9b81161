// A read-only block of zeros that every stream encoder sends from when a protocol
// has no cheaper way to say "zeros" (Chunked without --prezeroed, raw). Nobody ever
// writes to it, so sharing it between transfers shares no state.
#pragma once

#include <cstddef>
#include <span>

namespace sluice {

constexpr std::size_t zero_block_size = 2u << 20;

// zero_block_size zero bytes, 4096-aligned.
std::span<const std::byte> zero_block();

}  // namespace sluice
