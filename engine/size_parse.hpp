// Human sizes as users type them: 512, 64k, 2M, 1G, 1.5T (binary multiples; an
// optional trailing "B" or "iB" is accepted).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/error.hpp"

namespace sluice {

Result<std::uint64_t> parse_size(std::string_view text);

// 2147483648 -> "2.0 GiB"
std::string format_size(std::uint64_t bytes);

}  // namespace sluice
