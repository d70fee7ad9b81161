// The automatic depth: the measured default near by, enough for the link's round trip
// far away, never past the in-flight limit; an explicit depth is left alone. And the
// request size both ends accept (settle_sizes).
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

TEST_CASE("buffers_for: the depth, but for a local source into a destination that lets go once sent") {
  CHECK(buffers_for(4, false, microseconds(0)) == 4);
  CHECK(buffers_for(4, false, milliseconds(1)) == 4);
  CHECK(buffers_for(4, true, microseconds(0)) == CopyOptions::local_read_ahead_buffers);
  CHECK(buffers_for(1, true, microseconds(0)) == 1);
  CHECK(buffers_for(4, true, microseconds(30)) == 4);  // an NBD source, even on loopback
  CHECK(buffers_for(24, true, milliseconds(20)) == 24);
}

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

TEST_CASE("settle_sizes: the request fits both ends' block sizes") {
  const BlockSizes file{1, 4096, 32u << 20};
  CopyOptions o = automatic(1 << 20);
  REQUIRE(settle_sizes(o, file, file));
  CHECK(o.request_size == (1u << 20));
  CHECK(o.alignment == 1);

  // An NBD export with 64 KiB blocks: requests stay whole blocks, zero scans as coarse.
  o = automatic(1 << 20);
  o.sparse = 4096;
  REQUIRE(settle_sizes(o, file, BlockSizes{65536, 65536, 32u << 20}));
  CHECK(o.request_size == (1u << 20));
  CHECK(o.alignment == 65536);
  CHECK(o.sparse == 65536);

  // A maximum under the asked size wins, rounded down to a power of two.
  o = automatic(2 << 20);
  REQUIRE(settle_sizes(o, BlockSizes{512, 4096, 3u << 20}, file));
  CHECK(o.request_size == (2u << 20));
  o = automatic(4 << 20);
  REQUIRE(settle_sizes(o, BlockSizes{512, 4096, 3u << 20}, file));
  CHECK(o.request_size == (2u << 20));

  // A server that takes at most 1 KiB: requests under 4 KiB rather than no copy.
  o = automatic(1 << 20);
  REQUIRE(settle_sizes(o, file, BlockSizes{512, 512, 1024}));
  CHECK(o.request_size == 1024);
  CHECK(o.alignment == 512);
}

TEST_CASE("settle_sizes: what cannot fit is an error, not a guess") {
  const BlockSizes file{1, 4096, 32u << 20};
  CopyOptions o = automatic(1 << 20);
  auto both = settle_sizes(o, BlockSizes{65536, 65536, 32u << 20}, BlockSizes{512, 512, 4096});
  REQUIRE_FALSE(both);
  CHECK(both.error().message == "no request size fits both ends (minimum 65536, maximum 4096)");
  o = automatic(1 << 20);
  auto odd = settle_sizes(o, file, BlockSizes{3000, 3000, 32u << 20});
  REQUIRE_FALSE(odd);
  CHECK(odd.error().message == "minimum block size 3000 is not a power of two");
  o = automatic(1000);
  auto unaligned = settle_sizes(o, file, file);
  REQUIRE_FALSE(unaligned);
  CHECK(unaligned.error().message == "request size must be a positive multiple of 4096");
}

TEST_CASE("stripe_size_for: whole requests and the alignment") {
  CopyOptions o;
  o.request_size = 3u << 20;
  o.alignment = 4096;
  CHECK(stripe_size_for(o) == 66u << 20);  // 64 MiB rounded up to 22 requests
  o.request_size = 1u << 20;
  CHECK(stripe_size_for(o) == 64u << 20);
  o.stripe_size = 100;
  CHECK(stripe_size_for(o) == 1u << 20);
}

TEST_CASE("lanes_for: one per CPU up to the automatic limit, never more than the depth or the stripes") {
  CopyOptions o;
  o.request_size = 1u << 20;
  o.depth = 8;
  const std::uint64_t big = 1ull << 32;
  CHECK(lanes_for(o, big, 1) == 1);
  CHECK(lanes_for(o, big, 2) == 2);
  CHECK(lanes_for(o, big, 64) == CopyOptions::max_automatic_lanes);
  o.lanes = 6;
  CHECK(lanes_for(o, big, 2) == 6);  // asked for: more than the CPUs is the caller's call
  o.depth = 3;
  CHECK(lanes_for(o, big, 2) == 3);
  o.depth = 8;
  CHECK(lanes_for(o, 64u << 20, 2) == 1);        // a single stripe
  CHECK(lanes_for(o, (64u << 20) + 1, 2) == 2);  // two
  CHECK(lanes_for(o, 0, 2) == 1);
  o.lanes = 1;
  CHECK(lanes_for(o, big, 64) == 1);
}
