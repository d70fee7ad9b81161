#include "engine/net/opening_limit.hpp"

#include <doctest/doctest.h>

using namespace std::chrono_literals;
using sluice::opening_limit;

TEST_CASE("the opening is bounded by the smaller limit that is set, and names it") {
  CHECK(opening_limit(0s, 30s).seconds == 30s);
  CHECK(opening_limit(0s, 30s).describe() == "30 seconds (--connect-timeout)");
  CHECK(opening_limit(2s, 30s).seconds == 2s);
  CHECK(opening_limit(2s, 30s).describe() == "2 seconds (--timeout)");
  CHECK(opening_limit(60s, 5s).describe() == "5 seconds (--connect-timeout)");
  CHECK(opening_limit(7s, 0s).describe() == "7 seconds (--timeout)");
  // Equal limits: either name is true.
  CHECK(opening_limit(5s, 5s).seconds == 5s);
}

TEST_CASE("with neither limit set the opening is unbounded") { CHECK(opening_limit(0s, 0s).seconds == 0s); }
