#include "protocols/common/zero_block.hpp"

namespace sluice {

namespace {
// Zero-initialised static storage: the kernel backs it with the shared zero page until
// someone writes to it, and nobody does.
alignas(4096) const std::byte zeros[zero_block_size] = {};
}  // namespace

std::span<const std::byte> zero_block() { return {zeros, zero_block_size}; }

}  // namespace sluice
