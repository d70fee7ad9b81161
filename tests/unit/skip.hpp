// A test case that cannot run here says so instead of passing: skip_test("why") marks
// the running case skipped and prints "SKIP: <case>: why". main.cpp exits with 77,
// meson's SKIP, when a run skipped any case and failed none. Cases that may skip carry
// the "environment" test suite so meson.build can give them a test of their own.
#pragma once

#include <string_view>

namespace sluice::test {

// The caller returns (or co_returns) after it; checks made before still count.
void skip_test(std::string_view why);

}  // namespace sluice::test
