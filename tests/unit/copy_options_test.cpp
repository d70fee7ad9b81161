// The automatic depth: the measured default near by, enough for the link's round trip
// far away, never past the in-flight limit; an explicit depth is left alone.
#include <doctest/doctest.h>

#include <chrono>

#include "engine/copy_options.hpp"

using namespace sluice;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {
CopyOptions automatic(std::size_t request_size) {
  CopyOptions o;
  o.request_size = request_size;
  return o;
}
}  // namespace

TEST_CASE("depth_for: local and near ends keep the default depth") {
  CHECK(depth_for(automatic(2u << 20), microseconds(0)) == CopyOptions::default_depth);
  CHECK(depth_for(automatic(2u << 20), microseconds(200)) == CopyOptions::default_depth);
  CHECK(depth_for(automatic(2u << 20), milliseconds(5)) == CopyOptions::default_depth);
}

TEST_CASE("depth_for: two round trips at 10 Gbit/s in flight, far away") {
  // 20 ms: 2 x 0.02 s x 1.25e9 B/s = 50 MB = 23.8 requests of 2 MiB.
  CHECK(depth_for(automatic(2u << 20), milliseconds(20)) == 24);
  // 10 ms: 25 MB = 11.9 requests.
  CHECK(depth_for(automatic(2u << 20), milliseconds(10)) == 12);
  // Smaller requests: more of them for the same bytes.
  CHECK(depth_for(automatic(1u << 20), milliseconds(10)) == 24);
}

TEST_CASE("depth_for: never more than the in-flight limit, never less than the default") {
  const std::size_t limit_2m = CopyOptions::latency_in_flight_limit / (2u << 20);
  CHECK(depth_for(automatic(2u << 20), milliseconds(200)) == limit_2m);
  CHECK(depth_for(automatic(2u << 20), std::chrono::seconds(5)) == limit_2m);
  // Requests so large that the limit holds fewer than the default: the default.
  CHECK(depth_for(automatic(32u << 20), milliseconds(200)) == CopyOptions::default_depth);
}

TEST_CASE("depth_for: an explicit depth is kept at any distance") {
  CopyOptions o = automatic(2u << 20);
  o.depth = 1;
  CHECK(depth_for(o, milliseconds(20)) == 1);
  o.depth = 100;
  CHECK(depth_for(o, microseconds(0)) == 100);
}
