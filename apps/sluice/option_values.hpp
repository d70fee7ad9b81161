// Option values every command parses the same way; a bad one is a UsageError naming
// the option.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice::cli {

// A byte count with an optional unit: 4096, 64k, 2M, 1.5G.
std::uint64_t size_argument(const char* name, const char* text);

// A plain decimal count (depths, connections, threads, seconds): no units or
// fractions, so "--depth 1k" is refused rather than read as 1024.
std::uint64_t count_argument(const char* name, const char* text);

// A count within [low, high]; otherwise "--NAME must be between LOW and HIGH".
std::uint64_t count_between(const char* name, const char* text, std::uint64_t low, std::uint64_t high);

// A count of seconds (timeouts), at most max_seconds_argument: a deadline past that
// would overflow the clock and fire at once.
constexpr std::uint64_t max_seconds_argument = 100ull * 365 * 24 * 3600;  // 100 years
std::chrono::seconds seconds_argument(const char* name, const char* text);

}  // namespace sluice::cli
