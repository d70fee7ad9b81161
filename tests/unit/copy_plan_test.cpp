// The copy plan: what each pair of ends and each set of options makes of a copy,
// every field at once (a table of cases), then the steps the plan takes one by one.
#include <doctest/doctest.h>

#include <chrono>
#include <sstream>
#include <string>

#include "engine/copy_options.hpp"
#include "engine/copy_plan.hpp"
#include "engine/destination.hpp"
#include "engine/source.hpp"

using namespace sluice;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace doctest {
template <>
struct StringMaker<CopyPlan> {
  static String convert(const CopyPlan& p) {
    std::ostringstream out;
    out << "{request_size " << p.request_size << ", alignment " << p.alignment << ", depth " << p.depth
        << ", lanes " << p.lanes << ", stripe_size " << p.stripe_size << ", lane_depth " << p.lane_depth
        << ", buffers " << p.buffers << ", data_slots " << p.data_slots << ", scan_slots " << p.scan_slots
        << ", round_trip " << p.round_trip.count() << " us, by_reference " << p.by_reference << ", zero_scan "
        << to_string(p.zero_scan) << ", sparse " << p.sparse << ", skip_zero_ranges " << p.skip_zero_ranges
        << ", ordered " << p.ordered << "}";
    return out.str().c_str();
  }
};
}  // namespace doctest

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::uint64_t big_image = 4ull << 30;

// The ends as the real endpoints describe themselves (storage/, protocols/).
SourceTraits file_source() {
  SourceTraits t;
  t.serves_lanes = true;
  t.gives_file_slices = true;
  return t;
}

SourceTraits nbd_source(microseconds round_trip, BlockSizes sizes = {}) {
  SourceTraits t;
  t.block_sizes = sizes;
  t.round_trip = round_trip;
  return t;
}

DestinationTraits file_destination() {
  DestinationTraits t;
  t.takes_file_slices = true;
  t.file_slices_pay = true;
  t.takes_pipes = true;
  t.known_zero = true;  // created or truncated for the copy
  t.writes_in_flight = 256;
  return t;
}

DestinationTraits nbd_destination(microseconds round_trip, bool write_zeroes = true) {
  DestinationTraits t;
  t.round_trip = round_trip;
  t.takes_lanes = true;
  t.takes_file_slices = true;  // a plain socket
  t.file_slices_pay = false;
  t.zero_is_cheap = write_zeroes;
  t.releases_buffers_when_sent = true;
  return t;
}

DestinationTraits null_destination() {
  DestinationTraits t;
  t.takes_lanes = true;
  t.takes_pipes = true;
  t.known_zero = true;
  t.discards = true;
  return t;
}

DestinationTraits chunked_destination(bool splices) {
  DestinationTraits t;
  t.block_sizes = BlockSizes{512, 4096, 2u << 20};
  t.takes_file_slices = splices;
  t.file_slices_pay = splices;
  t.zero_is_cheap = false;
  return t;
}

DestinationTraits raw_destination(bool splices) {
  DestinationTraits t;
  t.takes_file_slices = splices;
  t.file_slices_pay = splices;
  t.zero_is_cheap = false;
  t.ordered = true;
  return t;
}

struct Case {
  const char* name;
  CopyOptions options;
  SourceTraits source;
  DestinationTraits destination;
  std::uint64_t image_size = big_image;
  std::size_t lane_loops = 0;
  CopyPlan expected;
};

CopyOptions with(void (*change)(CopyOptions&)) {
  CopyOptions o;
  change(o);
  return o;
}

const Case cases[] = {
    {"file -> file: spliced, zeros found in place until that proves dear", {}, file_source(), file_destination(),
     big_image, 0,
     CopyPlan{.request_size = 2 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 8, .round_trip = {}, .by_reference = true,
              .zero_scan = ZeroScan::in_place_until_dear, .sparse = 4096, .skip_zero_ranges = true,
              .ordered = false}},
    {"file -> file --zero-copy: zeros found in place for good", with([](CopyOptions& o) { o.zero_copy = ZeroCopy::always; }),
     file_source(), file_destination(), big_image, 0,
     CopyPlan{.request_size = 2 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 8, .round_trip = {}, .by_reference = true,
              .zero_scan = ZeroScan::in_place, .sparse = 4096, .skip_zero_ranges = true, .ordered = false}},
    {"file -> file --no-zero-copy --sparse=0: buffered, no zeros looked for",
     with([](CopyOptions& o) {
       o.zero_copy = ZeroCopy::never;
       o.sparse = 0;
     }),
     file_source(), file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true, .ordered = false}},
    {"file -> file --no-zero-copy: zeros found in buffers", with([](CopyOptions& o) { o.zero_copy = ZeroCopy::never; }),
     file_source(), file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = true, .ordered = false}},
    {"file -> file --depth=3 --request-size=4M --sparse=0: spliced as asked",
     with([](CopyOptions& o) {
       o.depth = 3;
       o.request_size = 4 * MiB;
       o.sparse = 0;
     }),
     file_source(), file_destination(), big_image, 0,
     CopyPlan{.request_size = 4 * MiB, .alignment = 1, .depth = 3, .lanes = 1, .stripe_size = 0, .lane_depth = 3,
              .buffers = 3, .data_slots = 256, .scan_slots = 0, .round_trip = {}, .by_reference = true,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true, .ordered = false}},
    {"file -> file --allocated: zero ranges are written, not skipped",
     with([](CopyOptions& o) {
       o.zero_copy = ZeroCopy::never;
       o.allocated = true;
     }),
     file_source(), file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false, .ordered = false}},
    {"file -> NBD near: buffered WRITEs, two lanes on the client's loops, two buffers read ahead each", {},
     file_source(), nbd_destination(microseconds(50)), big_image, 4,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 2, .stripe_size = 64 * MiB,
              .lane_depth = 4, .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = microseconds(50),
              .by_reference = false, .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false,
              .ordered = false}},
    {"file -> NBD far (20 ms) on one connection: two round trips of 10 Gbit/s in flight, one lane", {},
     file_source(), nbd_destination(milliseconds(20)), big_image, 1,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 48, .lanes = 1, .stripe_size = 0, .lane_depth = 48,
              .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = milliseconds(20), .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false, .ordered = false}},
    {"file -> NBD --zero-copy: spliced WRITEs, zeros found in place", with([](CopyOptions& o) { o.zero_copy = ZeroCopy::always; }),
     file_source(), nbd_destination(microseconds(50)), big_image, 0,
     CopyPlan{.request_size = 2 * MiB, .alignment = 1, .depth = 8, .lanes = 2, .stripe_size = 64 * MiB,
              .lane_depth = 4, .buffers = 2, .data_slots = 0, .scan_slots = 4, .round_trip = microseconds(50),
              .by_reference = true, .zero_scan = ZeroScan::in_place, .sparse = 4096, .skip_zero_ranges = false,
              .ordered = false}},
    {"file -> NBD without WRITE_ZEROES, --prezeroed: zeros still found, and skipped",
     with([](CopyOptions& o) { o.destination_is_zero = true; }), file_source(),
     nbd_destination(microseconds(50), false), big_image, 1,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = microseconds(50), .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = true, .ordered = false}},
    {"file -> NBD without WRITE_ZEROES: zeros would cost what data costs, none looked for", {}, file_source(),
     nbd_destination(microseconds(50), false), big_image, 1,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = microseconds(50), .by_reference = false,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = false, .ordered = false}},
    {"file -> NBD whose first loop is not the copy's: one lane", {}, file_source(),
     nbd_destination(microseconds(50)), big_image, 1,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = microseconds(50), .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false, .ordered = false}},
    {"file -> null: two lanes of copier loops, nothing looked for", {}, file_source(), null_destination(), big_image,
     0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 2, .stripe_size = 64 * MiB,
              .lane_depth = 4, .buffers = 4, .data_slots = 0, .scan_slots = 0, .round_trip = {},
              .by_reference = false, .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true,
              .ordered = false}},
    {"file -> null --lanes=3 --depth=10: the depth shared, its remainder dropped",
     with([](CopyOptions& o) {
       o.lanes = 3;
       o.depth = 10;
     }),
     file_source(), null_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 9, .lanes = 3, .stripe_size = 64 * MiB,
              .lane_depth = 3, .buffers = 3, .data_slots = 0, .scan_slots = 0, .round_trip = {},
              .by_reference = false, .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true,
              .ordered = false}},
    {"file -> null, an image of one stripe: one lane", {}, file_source(), null_destination(), 64 * MiB, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 0, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true, .ordered = false}},
    {"file -> null --lanes=1", with([](CopyOptions& o) { o.lanes = 1; }), file_source(), null_destination(),
     big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 0, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true, .ordered = false}},
    {"NBD near -> file: the source serves no lanes, zeros found in buffers", {}, nbd_source(microseconds(200)),
     file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 0, .round_trip = microseconds(200),
              .by_reference = false, .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = true,
              .ordered = false}},
    {"NBD far with 64 KiB blocks -> file: whole blocks, as coarse a zero scan, deep", {},
     nbd_source(milliseconds(20), BlockSizes{65536, 65536, 32u << 20}), file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 65536, .depth = 48, .lanes = 1, .stripe_size = 0,
              .lane_depth = 48, .buffers = 48, .data_slots = 256, .scan_slots = 0, .round_trip = milliseconds(20),
              .by_reference = false, .zero_scan = ZeroScan::in_buffers, .sparse = 65536, .skip_zero_ranges = true,
              .ordered = false}},
    {"NBD -> file --zero-copy: a source with no file slices goes through buffers",
     with([](CopyOptions& o) { o.zero_copy = ZeroCopy::always; }), nbd_source(microseconds(200)),
     file_destination(), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 256, .scan_slots = 0, .round_trip = microseconds(200),
              .by_reference = false, .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = true,
              .ordered = false}},
    {"NBD far -> NBD far: the farther round trip, buffers to cover the reads' round trips", {},
     nbd_source(milliseconds(10)), nbd_destination(milliseconds(1)), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 1, .depth = 24, .lanes = 1, .stripe_size = 0, .lane_depth = 24,
              .buffers = 24, .data_slots = 0, .scan_slots = 0, .round_trip = milliseconds(10), .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false, .ordered = false}},
    {"file -> NBD far --request-size=32M: the in-flight limit holds fewer than the default depth",
     with([](CopyOptions& o) { o.request_size = 32 * MiB; }), file_source(), nbd_destination(milliseconds(200)),
     big_image, 1,
     CopyPlan{.request_size = 32 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 2, .data_slots = 0, .scan_slots = 0, .round_trip = milliseconds(200), .by_reference = false,
              .zero_scan = ZeroScan::in_buffers, .sparse = 4096, .skip_zero_ranges = false, .ordered = false}},
    {"file -> Chunked socket: spliced up to vhd-tool's 2 MiB, no zeros looked for", {}, file_source(),
     chunked_destination(true), big_image, 0,
     CopyPlan{.request_size = 2 * MiB, .alignment = 512, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 0, .scan_slots = 0, .round_trip = {}, .by_reference = true,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = false, .ordered = false}},
    {"file -> Chunked over TLS: buffered", {}, file_source(), chunked_destination(false), big_image, 0,
     CopyPlan{.request_size = 1 * MiB, .alignment = 512, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 0, .scan_slots = 0, .round_trip = {}, .by_reference = false,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = false, .ordered = false}},
    {"file -> raw socket --prezeroed: in order, zeros still not looked for",
     with([](CopyOptions& o) { o.destination_is_zero = true; }), file_source(), raw_destination(true), big_image, 0,
     CopyPlan{.request_size = 2 * MiB, .alignment = 1, .depth = 8, .lanes = 1, .stripe_size = 0, .lane_depth = 8,
              .buffers = 8, .data_slots = 0, .scan_slots = 0, .round_trip = {}, .by_reference = true,
              .zero_scan = ZeroScan::none, .sparse = 0, .skip_zero_ranges = true, .ordered = true}},
};

}  // namespace

TEST_CASE("the plan of each kind of copy, every field") {
  for (const Case& c : cases) {
    INFO(c.name);
    auto plan = plan_copy(c.options, c.source, c.destination, c.image_size, 2, c.lane_loops);
    REQUIRE(plan);
    CHECK(*plan == c.expected);
  }
}

TEST_CASE("the plan: automatic lanes follow the CPUs, up to the automatic limit") {
  auto lanes = [](std::size_t cpus) {
    return plan_copy(CopyOptions{}, file_source(), null_destination(), big_image, cpus, 0)->lanes;
  };
  CHECK(lanes(1) == 1);
  CHECK(lanes(2) == 2);
  CHECK(lanes(64) == CopyOptions::max_automatic_lanes);
}

TEST_CASE("the plan: no request size fits both ends, no plan") {
  DestinationTraits tiny = file_destination();
  tiny.block_sizes = BlockSizes{512, 512, 4096};
  auto plan = plan_copy(CopyOptions{}, nbd_source(microseconds(200), BlockSizes{65536, 65536, 32u << 20}), tiny,
                        big_image, 2, 0);
  REQUIRE_FALSE(plan);
  CHECK(plan.error().message == "no request size fits both ends (minimum 65536, maximum 4096)");
}

// The steps.

TEST_CASE("request_size_for: as asked, else larger where the payload goes by reference") {
  CHECK(request_size_for(0, false) == CopyOptions::buffered_request_size);
  CHECK(request_size_for(0, true) == CopyOptions::spliced_request_size);
  CHECK(request_size_for(3 * MiB, true) == 3 * MiB);
}

TEST_CASE("buffers_for: the depth, but for a local source into a destination that lets go once sent") {
  CHECK(buffers_for(4, false, microseconds(0)) == 4);
  CHECK(buffers_for(4, false, milliseconds(1)) == 4);
  CHECK(buffers_for(4, true, microseconds(0)) == CopyOptions::local_read_ahead_buffers);
  CHECK(buffers_for(1, true, microseconds(0)) == 1);
  CHECK(buffers_for(4, true, microseconds(30)) == 4);  // an NBD source, even on loopback
  CHECK(buffers_for(24, true, milliseconds(20)) == 24);
}

TEST_CASE("depth_for: local and near ends keep the default depth") {
  CHECK(depth_for(0, 2 * MiB, microseconds(0)) == CopyOptions::default_depth);
  CHECK(depth_for(0, 2 * MiB, microseconds(200)) == CopyOptions::default_depth);
  CHECK(depth_for(0, 2 * MiB, milliseconds(5)) == CopyOptions::default_depth);
}

TEST_CASE("depth_for: two round trips at 10 Gbit/s in flight, far away") {
  // 20 ms: 2 x 0.02 s x 1.25e9 B/s = 50 MB = 23.8 requests of 2 MiB.
  CHECK(depth_for(0, 2 * MiB, milliseconds(20)) == 24);
  // 10 ms: 25 MB = 11.9 requests.
  CHECK(depth_for(0, 2 * MiB, milliseconds(10)) == 12);
  // Smaller requests: more of them for the same bytes.
  CHECK(depth_for(0, 1 * MiB, milliseconds(10)) == 24);
}

TEST_CASE("depth_for: never more than the in-flight limit, never less than the default") {
  const std::size_t limit_2m = CopyOptions::latency_in_flight_limit / (2 * MiB);
  CHECK(depth_for(0, 2 * MiB, milliseconds(200)) == limit_2m);
  CHECK(depth_for(0, 2 * MiB, std::chrono::seconds(5)) == limit_2m);
  // Requests so large that the limit holds fewer than the default: the default.
  CHECK(depth_for(0, 32 * MiB, milliseconds(200)) == CopyOptions::default_depth);
}

TEST_CASE("depth_for: an explicit depth is kept at any distance") {
  CHECK(depth_for(1, 2 * MiB, milliseconds(20)) == 1);
  CHECK(depth_for(100, 2 * MiB, microseconds(0)) == 100);
}

TEST_CASE("settle_sizes: the request fits both ends' block sizes") {
  const BlockSizes file{1, 4096, 32u << 20};
  auto s = settle_sizes(1 * MiB, 4096, file, file);
  REQUIRE(s);
  CHECK(s->request_size == 1 * MiB);
  CHECK(s->alignment == 1);
  CHECK(s->sparse == 4096);

  // An NBD export with 64 KiB blocks: requests stay whole blocks, zero scans as coarse.
  s = settle_sizes(1 * MiB, 4096, file, BlockSizes{65536, 65536, 32u << 20});
  REQUIRE(s);
  CHECK(s->request_size == 1 * MiB);
  CHECK(s->alignment == 65536);
  CHECK(s->sparse == 65536);
  // No zero detection stays none.
  s = settle_sizes(1 * MiB, 0, file, BlockSizes{65536, 65536, 32u << 20});
  REQUIRE(s);
  CHECK(s->sparse == 0);

  // A maximum under the asked size wins, rounded down to a power of two.
  s = settle_sizes(2 * MiB, 4096, BlockSizes{512, 4096, 3u << 20}, file);
  REQUIRE(s);
  CHECK(s->request_size == 2 * MiB);
  s = settle_sizes(4 * MiB, 4096, BlockSizes{512, 4096, 3u << 20}, file);
  REQUIRE(s);
  CHECK(s->request_size == 2 * MiB);

  // A server that takes at most 1 KiB: requests under 4 KiB rather than no copy.
  s = settle_sizes(1 * MiB, 4096, file, BlockSizes{512, 512, 1024});
  REQUIRE(s);
  CHECK(s->request_size == 1024);
  CHECK(s->alignment == 512);
}

TEST_CASE("settle_sizes: what cannot fit is an error, not a guess") {
  const BlockSizes file{1, 4096, 32u << 20};
  auto both = settle_sizes(1 * MiB, 4096, BlockSizes{65536, 65536, 32u << 20}, BlockSizes{512, 512, 4096});
  REQUIRE_FALSE(both);
  CHECK(both.error().message == "no request size fits both ends (minimum 65536, maximum 4096)");
  auto odd = settle_sizes(1 * MiB, 4096, file, BlockSizes{3000, 3000, 32u << 20});
  REQUIRE_FALSE(odd);
  CHECK(odd.error().message == "minimum block size 3000 is not a power of two");
  auto unaligned = settle_sizes(1000, 4096, file, file);
  REQUIRE_FALSE(unaligned);
  CHECK(unaligned.error().message == "request size must be a positive multiple of 4096");
}

TEST_CASE("stripe_size_for: whole requests and the alignment") {
  CHECK(stripe_size_for(64 * MiB, 3 * MiB, 4096) == 66 * MiB);  // 64 MiB rounded up to 22 requests
  CHECK(stripe_size_for(64 * MiB, 1 * MiB, 4096) == 64 * MiB);
  CHECK(stripe_size_for(100, 1 * MiB, 4096) == 1 * MiB);
}

TEST_CASE("lanes_for: one per CPU up to the automatic limit, never more than the depth or the stripes") {
  const std::uint64_t stripe = 64 * MiB;
  CHECK(lanes_for(0, 8, stripe, big_image, 1) == 1);
  CHECK(lanes_for(0, 8, stripe, big_image, 2) == 2);
  CHECK(lanes_for(0, 8, stripe, big_image, 64) == CopyOptions::max_automatic_lanes);
  CHECK(lanes_for(6, 8, stripe, big_image, 2) == 6);  // asked for: more than the CPUs is the caller's call
  CHECK(lanes_for(6, 3, stripe, big_image, 2) == 3);
  CHECK(lanes_for(6, 8, stripe, stripe, 2) == 1);      // a single stripe
  CHECK(lanes_for(6, 8, stripe, stripe + 1, 2) == 2);  // two
  CHECK(lanes_for(6, 8, stripe, 0, 2) == 1);
  CHECK(lanes_for(1, 8, stripe, big_image, 64) == 1);
}
