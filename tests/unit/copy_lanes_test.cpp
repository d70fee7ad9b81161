// Copies in lanes: stripes of the image copied side by side, each lane on a thread of
// its own. The endpoints here are safe to call from several threads and remember which
// thread called, so the tests can tell where each kind of work ran.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/copier.hpp"
#include "engine/loop_threads.hpp"
#include "engine/run_on.hpp"
#include "engine/stripes.hpp"
#include "copy_scenarios.hpp"
#include "memory_endpoints.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {

constexpr auto D = ExtentKind::data;
constexpr auto H = ExtentKind::hole;
constexpr auto Z = ExtentKind::zero;

awaitable<void> short_random_delay() {
  thread_local std::mt19937 rng(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::microseconds(rng() % 150));
  co_await t.async_wait(use_nothrow);
}

class LaneSource final : public Source {
 public:
  LaneSource(std::vector<std::byte> image, std::vector<Extent> map) : image_(std::move(image)), map_(std::move(map)) {}

  std::uint64_t size() const override { return image_.size(); }
  std::string describe() const override { return "lane source"; }

  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t length) override {
    co_return test::extents_within(map_, offset, length);
  }

  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into) override {
    note_thread();
    co_await short_random_delay();
    if (fail_read_at && offset <= *fail_read_at && *fail_read_at < offset + into.size())
      co_return fail_at("read", offset, std::make_error_code(std::errc::io_error));
    std::memcpy(into.data(), image_.data() + offset, into.size());
    co_return Status{};
  }

  SourceTraits traits() const override {
    SourceTraits traits;
    traits.serves_lanes = allow_lanes;
    return traits;
  }
  void serve_lanes() override { served_lanes = true; }

  void note_thread() {
    std::lock_guard lock(mutex);
    reader_threads.insert(std::this_thread::get_id());
  }

  bool allow_lanes = true;
  bool served_lanes = false;
  std::optional<std::uint64_t> fail_read_at;
  std::mutex mutex;
  std::set<std::thread::id> reader_threads;

 private:
  std::vector<std::byte> image_;
  std::vector<Extent> map_;
};

// Counts how often each byte was written or zeroed: every byte exactly once.
class LaneSink final : public Destination {
 public:
  explicit LaneSink(std::uint64_t size) : image(size, std::byte{0xEE}), times_written(size, 0) {}

  DestinationTraits traits() const override { return traits_; }
  std::string describe() const override { return "lane sink"; }

  awaitable<Status> write(std::uint64_t offset, Buffer data) override {
    std::vector<std::byte> expected(data.bytes().begin(), data.bytes().end());
    begin();
    co_await short_random_delay();
    co_await wait_for_every_lane();
    if (write_delay.count() > 0) {
      asio::steady_timer slow(co_await asio::this_coro::executor, write_delay);
      co_await slow.async_wait(use_nothrow);
    }
    std::lock_guard lock(mutex);
    --in_flight;
    if (std::memcmp(data.bytes().data(), expected.data(), expected.size()) != 0) ++corruptions;
    std::memcpy(image.data() + offset, expected.data(), expected.size());
    mark(offset, expected.size());
    co_return Status{};
  }

  awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode) override {
    begin();
    co_await short_random_delay();
    std::lock_guard lock(mutex);
    --in_flight;
    std::fill_n(image.begin() + static_cast<std::ptrdiff_t>(offset), length, std::byte{0});
    mark(offset, length);
    co_return Status{};
  }

  std::vector<executor> lane_loops() const override { return own_loops; }
  void serve_lanes() override { served_lanes = true; }

  awaitable<Status> flush() override {
    flush_thread = std::this_thread::get_id();
    flushed = true;
    co_return Status{};
  }
  awaitable<Status> finish() override {
    finished = true;
    co_return Status{};
  }

  bool every_byte_once() const {
    return std::all_of(times_written.begin(), times_written.end(), [](unsigned char n) { return n == 1; });
  }

  DestinationTraits traits_ = [] {
    DestinationTraits t;
    t.takes_lanes = true;
    return t;
  }();
  std::chrono::milliseconds write_delay{0};
  // Stripes go to whichever lane claims them first, so on a loaded machine one lane may
  // copy the whole image before another has started. A test that asserts where lanes
  // ran holds each write until this many threads have written (or 10 s have passed,
  // and the test's checks then fail).
  std::size_t hold_until_writers = 0;
  std::vector<executor> own_loops;  // lane_loops(): none unless a test gives some
  bool served_lanes = false;
  std::vector<std::byte> image;
  std::vector<unsigned char> times_written;
  std::mutex mutex;
  std::size_t in_flight = 0, max_in_flight = 0, corruptions = 0;
  std::set<std::thread::id> writer_threads;
  std::thread::id flush_thread;
  bool flushed = false, finished = false;

 private:
  void begin() {
    std::lock_guard lock(mutex);
    writer_threads.insert(std::this_thread::get_id());
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
  }
  std::size_t writers_seen() {
    std::lock_guard lock(mutex);
    return writer_threads.size();
  }
  awaitable<void> wait_for_every_lane() {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (writers_seen() < hold_until_writers && std::chrono::steady_clock::now() < give_up) {
      asio::steady_timer tick(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
      co_await tick.async_wait(use_nothrow);
    }
  }
  void mark(std::uint64_t offset, std::uint64_t length) {
    for (std::uint64_t i = offset; i < offset + length; ++i) ++times_written[i];
  }
};

// 16 stripes of 1 MiB; extents run over stripe boundaries, a hole spans three stripes.
const std::uint64_t image_size = (16u << 20) - 4096 * 3;
const std::vector<Extent> lane_map = {
    {0, (2u << 20) + 65536, D},
    {(2u << 20) + 65536, (3u << 20) - 65536, H},  // 2 MiB + 64 KiB .. 5 MiB
    {5u << 20, 4096 * 8, Z},
    {(5u << 20) + 32768, (11u << 20) - 32768 - 4096 * 3, D},
};

CopyOptions lane_options(std::size_t lanes) {
  CopyOptions o;
  o.lanes = lanes;
  o.depth = 8;
  o.request_size = 128 * 1024;
  o.stripe_size = 1u << 20;
  return o;
}

}  // namespace

TEST_CASE("lanes: every byte lands once, reads run on every lane's thread, flush and progress on the caller's") {
  LaneSource source(test::patterned(image_size, lane_map), lane_map);
  LaneSink sink(image_size);
  sink.hold_until_writers = 2;
  CopyOptions options = lane_options(2);
  const auto caller = std::this_thread::get_id();
  std::uint64_t last_done = 0;
  bool monotonic = true, on_caller = true;
  int calls_at_end = 0;
  options.progress = [&](const ProgressUpdate& u) {
    on_caller = on_caller && std::this_thread::get_id() == caller;
    monotonic = monotonic && u.done >= last_done;
    last_done = u.done;
    if (u.done == u.total) ++calls_at_end;
  };
  auto stats = test::run(copy(source, sink, options));
  REQUIRE(stats);
  CHECK(stats->plan.lanes == 2);
  CHECK(sink.image == test::patterned(image_size, lane_map));
  CHECK(sink.every_byte_once());
  CHECK(sink.corruptions == 0);
  CHECK(source.reader_threads.size() == 2);
  CHECK(source.reader_threads.count(caller) == 1);
  CHECK(sink.writer_threads.size() == 2);
  CHECK(sink.max_in_flight <= 8);
  CHECK(stats->peak_buffers <= 8);
  CHECK(stats->plan.depth == 8);
  CHECK(sink.flushed);
  CHECK(sink.finished);
  CHECK(sink.flush_thread == caller);
  CHECK(on_caller);
  CHECK(monotonic);
  CHECK(last_done == image_size);
  CHECK(calls_at_end == 1);
  CHECK(stats->bytes_written + stats->bytes_zeroed == image_size);
}

TEST_CASE("lanes: the extents counted and the bytes moved are those of one lane") {
  auto run_with = [](std::size_t lanes) {
    LaneSource source(test::patterned(image_size, lane_map), lane_map);
    LaneSink sink(image_size);
    auto stats = test::run(copy(source, sink, lane_options(lanes)));
    REQUIRE(stats);
    CHECK(sink.every_byte_once());
    CHECK(sink.image == test::patterned(image_size, lane_map));
    return *stats;
  };
  const TransferStats one = run_with(1);
  const TransferStats three = run_with(3);
  CHECK(one.plan.lanes == 1);
  CHECK(three.plan.lanes == 3);
  CHECK(one.data_extents == 2);
  CHECK(one.hole_extents == 1);
  CHECK(one.zero_extents == 1);
  CHECK(three.data_extents == one.data_extents);
  CHECK(three.hole_extents == one.hole_extents);
  CHECK(three.zero_extents == one.zero_extents);
  CHECK(three.bytes_read == one.bytes_read);
  CHECK(three.bytes_written == one.bytes_written);
  CHECK(three.bytes_zeroed == one.bytes_zeroed);
}

TEST_CASE("lanes: a failed read in one lane stops them all and is the error reported") {
  LaneSource source(test::patterned(image_size, lane_map), lane_map);
  source.fail_read_at = (9u << 20) + 5;
  LaneSink sink(image_size);
  auto stats = test::run(copy(source, sink, lane_options(2)));
  REQUIRE_FALSE(stats);
  CHECK(stats.error().message.find("read") != std::string::npos);
  CHECK(stats.error().message.find(std::to_string(9u << 20)) != std::string::npos);
  CHECK(sink.in_flight == 0);
  CHECK_FALSE(sink.flushed);
  CHECK_FALSE(sink.finished);
}

TEST_CASE("lanes: a cancellation from another thread stops every lane") {
  LaneSource source(test::patterned(image_size, lane_map), lane_map);
  LaneSink sink(image_size);
  test::expect_cancelled_from_another_thread(source, sink, lane_options(2));
}

TEST_CASE("lanes: a progress callback that throws fails the copy with what it threw") {
  LaneSource source(test::patterned(image_size, lane_map), lane_map);
  LaneSink sink(image_size);
  test::expect_progress_failure_reported(source, sink, lane_options(2), 2u << 20);
}

TEST_CASE("lanes: progress calls stay bounded however small the pieces, and the last says done") {
  // Alternating 4 KiB of data and of zeros: zero detection completes 4 KiB pieces on
  // every lane, and a lane elsewhere must not post a call for each.
  const std::uint64_t size = 16u << 20;
  const std::vector<std::byte> image = test::alternating_pieces(size);
  LaneSource source(image, {{0, size, D}});
  LaneSink sink(size);
  auto counted = test::count_progress_calls(source, sink, lane_options(2));
  REQUIRE(counted.stats);
  CHECK(counted.stats->plan.lanes == 2);
  CHECK(sink.image == image);
  CHECK(counted.stats->zero_requests >= 2000);  // the pieces were that small
  // A lane elsewhere asks for calls as the home lane makes them.
  CHECK(counted.calls <= counted.bound(2));
  CHECK(counted.last.done == size);
}

TEST_CASE("lanes: one lane where an end does not allow them, and the source is not asked to change") {
  SUBCASE("the destination does not take lanes") {
    LaneSource source(test::patterned(image_size, lane_map), lane_map);
    LaneSink sink(image_size);
    sink.traits_.takes_lanes = false;
    auto stats = test::run(copy(source, sink, lane_options(2)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 1);
    CHECK_FALSE(source.served_lanes);
    CHECK(source.reader_threads.size() == 1);
    CHECK(sink.every_byte_once());
  }
  SUBCASE("the source cannot serve them") {
    LaneSource source(test::patterned(image_size, lane_map), lane_map);
    source.allow_lanes = false;
    LaneSink sink(image_size);
    auto stats = test::run(copy(source, sink, lane_options(2)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 1);
    CHECK_FALSE(source.served_lanes);
    CHECK_FALSE(sink.served_lanes);
    CHECK(source.reader_threads.size() == 1);
    CHECK(sink.every_byte_once());
  }
  SUBCASE("an ordered destination") {
    LaneSource source(test::patterned(image_size, lane_map), lane_map);
    LaneSink sink(image_size);
    sink.traits_.ordered = true;
    sink.traits_.takes_lanes = false;
    auto stats = test::run(copy(source, sink, lane_options(4)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 1);
  }
}

TEST_CASE("lanes: a destination with loops of its own has the lanes on them, no more lanes than loops") {
  asio::io_context home(1);
  LoopThreads own(2);
  own.start();
  // Each of the destination's loops says which thread runs it.
  std::vector<std::thread::id> own_threads;
  for (std::size_t i = 0; i < own.size(); ++i)
    own_threads.push_back(test::run(home, [](executor loop) -> awaitable<std::thread::id> {
      co_return co_await run_on(loop, []() -> awaitable<std::thread::id> { co_return std::this_thread::get_id(); }());
    }(own.at(i))));
  // Set up afresh for each subcase (doctest runs the case once per subcase).
  LaneSource source(test::patterned(image_size, lane_map), lane_map);
  LaneSink sink(image_size);
  const std::thread::id caller = std::this_thread::get_id();
  SUBCASE("lanes on the destination's loops, the caller's first") {
    sink.own_loops = {home.get_executor(), own.at(0), own.at(1)};
    sink.hold_until_writers = 3;
    auto stats = test::run(home, copy(source, sink, lane_options(4)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 3);
    CHECK(sink.served_lanes);
    CHECK(sink.every_byte_once());
    CHECK(sink.image == test::patterned(image_size, lane_map));
    const std::set<std::thread::id> expected = {caller, own_threads[0], own_threads[1]};
    CHECK(sink.writer_threads == expected);
    CHECK(source.reader_threads == expected);
    CHECK(sink.flush_thread == caller);
  }
  SUBCASE("fewer lanes asked for than it has loops") {
    sink.own_loops = {home.get_executor(), own.at(0), own.at(1)};
    sink.hold_until_writers = 2;
    auto stats = test::run(home, copy(source, sink, lane_options(2)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 2);
    CHECK(sink.writer_threads == std::set<std::thread::id>{caller, own_threads[0]});
    CHECK(sink.every_byte_once());
  }
  SUBCASE("its first loop is not the caller's: one lane, and neither end is told of lanes") {
    sink.own_loops = {own.at(0), own.at(1)};
    auto stats = test::run(home, copy(source, sink, lane_options(2)));
    REQUIRE(stats);
    CHECK(stats->plan.lanes == 1);
    CHECK_FALSE(sink.served_lanes);
    CHECK_FALSE(source.served_lanes);
    CHECK(sink.writer_threads == std::set<std::thread::id>{caller});
    CHECK(sink.every_byte_once());
  }
  SUBCASE("a lane on the destination's loop fails: the copy fails with its error, every lane stopped") {
    source.fail_read_at = (9u << 20) + 5;
    sink.own_loops = {home.get_executor(), own.at(0)};
    auto stats = test::run(home, copy(source, sink, lane_options(2)));
    REQUIRE_FALSE(stats);
    CHECK(stats.error().message.find(std::to_string(9u << 20)) != std::string::npos);
    CHECK(sink.in_flight == 0);
    CHECK_FALSE(sink.flushed);
  }
  own.stop();
}

TEST_CASE("stripes: claimed from several threads, each exactly once, covering the image") {
  const std::uint64_t size = (100u << 20) + 77;
  Stripes stripes(size, 1u << 20);
  CHECK(stripes.count() == 101);
  std::mutex mutex;
  std::vector<Stripe> claimed;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (auto s = stripes.claim()) {
        std::lock_guard lock(mutex);
        claimed.push_back(*s);
      }
    });
  for (auto& t : threads) t.join();
  REQUIRE(claimed.size() == 101);
  std::sort(claimed.begin(), claimed.end(), [](const Stripe& a, const Stripe& b) { return a.offset < b.offset; });
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    CHECK(claimed[i].index == i);
    CHECK(claimed[i].offset == next);
    next = claimed[i].end();
  }
  CHECK(next == size);
  CHECK(claimed.back().length == 77);
  CHECK_FALSE(stripes.claim());
}

TEST_CASE("stripes: one stripe for the whole image, and an empty image still has one") {
  Stripes whole(5000, 0);
  CHECK(whole.count() == 1);
  auto s = whole.claim();
  REQUIRE(s);
  CHECK(s->offset == 0);
  CHECK(s->length == 5000);
  Stripes empty(0, 1u << 20);
  CHECK(empty.count() == 1);
  auto e = empty.claim();
  REQUIRE(e);
  CHECK(e->length == 0);
}

TEST_CASE("stripes: an extent over a boundary is counted twice only where both sides agree") {
  Stripes stripes(4u << 20, 1u << 20);
  stripes.record_edges(0, D, D);
  stripes.record_edges(1, D, H);  // continues the data of stripe 0
  stripes.record_edges(2, H, Z);  // continues the hole
  stripes.record_edges(3, D, D);  // a new extent
  CHECK(stripes.counted_twice(D) == 1);
  CHECK(stripes.counted_twice(H) == 1);
  CHECK(stripes.counted_twice(Z) == 0);
}
