#include <doctest/doctest.h>

#include <chrono>

#include "engine/task_group.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {
awaitable<Status> sleep_then(int ms, Status result, int* finished) {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
  co_await t.async_wait(use_nothrow);
  ++*finished;
  co_return result;
}
}  // namespace

TEST_CASE("join waits for every child and reports the first real error") {
  int finished = 0;
  int stopped = 0;
  std::string hooked;
  auto task = [&]() -> awaitable<Status> {
    TaskGroup group(co_await asio::this_coro::executor, [&](const Error& e) {
      ++stopped;
      hooked = e.message;
    });
    group.spawn(sleep_then(30, Status{}, &finished));
    group.spawn(sleep_then(10, fail(std::errc::io_error, "first"), &finished));
    group.spawn(sleep_then(20, fail(std::errc::io_error, "second"), &finished));
    group.spawn(sleep_then(5, cancelled(), &finished));
    co_return co_await group.join();
  };
  Status status = test::run(task());
  REQUIRE_FALSE(status);
  CHECK(status.error().message == "first");
  CHECK(finished == 4);
  CHECK(stopped == 1);
  CHECK(hooked == "first");  // the hook is handed the error it fired for
}

TEST_CASE("a group of successes joins cleanly, even with no children") {
  int finished = 0;
  auto task = [&]() -> awaitable<Status> {
    TaskGroup empty(co_await asio::this_coro::executor);
    if (Status s = co_await empty.join(); !s) co_return s;
    TaskGroup group(co_await asio::this_coro::executor);
    for (int i = 0; i < 10; ++i) group.spawn(sleep_then(i, Status{}, &finished));
    co_return co_await group.join();
  };
  CHECK(test::run(task()));
  CHECK(finished == 10);
}

TEST_CASE("an exception in a child becomes an error value") {
  auto thrower = []() -> awaitable<Status> {
    throw std::runtime_error("boom");
    co_return Status{};
  };
  auto task = [&]() -> awaitable<Status> {
    TaskGroup group(co_await asio::this_coro::executor);
    group.spawn(thrower());
    co_return co_await group.join();
  };
  Status status = test::run(task());
  REQUIRE_FALSE(status);
  CHECK(status.error().message.find("boom") != std::string::npos);
}
