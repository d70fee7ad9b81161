#include <doctest/doctest.h>

#include <chrono>
#include <memory>

#include "engine/grace_period.hpp"

using namespace sluice;

TEST_CASE("a grace period cuts off once, when it runs out, and only if started and not ended") {
  asio::io_context context(1);
  int cut = 0;
  SUBCASE("started: cut off when it runs out, once however often started") {
    GracePeriod grace(context.get_executor(), std::chrono::milliseconds(10), [&] { ++cut; });
    grace.start();
    grace.start();
    context.run();
    CHECK(cut == 1);
    CHECK(grace.expired());
  }
  SUBCASE("never started: nothing happens") {
    GracePeriod grace(context.get_executor(), std::chrono::milliseconds(10), [&] { ++cut; });
    context.run();
    CHECK(cut == 0);
  }
  SUBCASE("ended in time: never cut off, and cannot be started again") {
    GracePeriod grace(context.get_executor(), std::chrono::milliseconds(10), [&] { ++cut; });
    grace.start();
    grace.end();
    grace.start();
    context.run();
    CHECK(cut == 0);
    CHECK_FALSE(grace.expired());
  }
  SUBCASE("gone before it runs out: its queued wait touches nothing") {
    auto grace = std::make_unique<GracePeriod>(context.get_executor(), std::chrono::milliseconds(10), [&] { ++cut; });
    grace->start();
    grace.reset();
    context.run();
    CHECK(cut == 0);
  }
}

TEST_CASE("grace periods are named in whole seconds, else in milliseconds") {
  CHECK(describe_grace(std::chrono::seconds(5)) == "5 s");
  CHECK(describe_grace(std::chrono::milliseconds(1500)) == "1500 ms");
}
