// Option values every command parses the same way; a bad one is a UsageError naming
// the option.
#pragma once

#include <cstdint>

namespace sluice::cli {

// A byte count with an optional unit: 4096, 64k, 2M, 1.5G.
std::uint64_t size_argument(const char* name, const char* text);

// A plain decimal count (depths, connections, threads, seconds): no units or
// fractions, so "--depth 1k" is refused rather than read as 1024.
std::uint64_t count_argument(const char* name, const char* text);

}  // namespace sluice::cli
