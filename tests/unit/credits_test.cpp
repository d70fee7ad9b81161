#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "engine/credits.hpp"
#include "engine/task_group.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {

awaitable<void> sleep_ms(int ms) {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
  co_await t.async_wait(use_nothrow);
}

// Holds a credit across a wait, as a page-cache write holds its file's one credit, and
// records how many holders there were at once.
awaitable<Status> hold(Credits& credits, std::size_t& holders, std::size_t& most, std::vector<int>& order, int id) {
  if (Status s = co_await credits.acquire(); !s) co_return s;
  CreditHeld held{credits};
  ++holders;
  if (holders > most) most = holders;
  order.push_back(id);
  co_await sleep_ms(2);
  --holders;
  co_return Status{};
}

// Gives up half way, with the credit still held: the guard must return it.
awaitable<Status> fail_while_holding(Credits& credits) {
  if (Status s = co_await credits.acquire(); !s) co_return s;
  CreditHeld held{credits};
  co_await sleep_ms(1);
  co_return fail(std::errc::io_error, "the write failed");
}

// Named, not a lambda: a lambda coroutine's captures die with the lambda, before a
// spawned coroutine has run.
awaitable<Status> wait_for_credit(Credits& credits, bool& cancelled) {
  Status s = co_await credits.acquire();
  cancelled = !s.has_value();
  co_return Status{};
}

}  // namespace

TEST_CASE("one credit: holders take turns, in the order they asked") {
  std::size_t holders = 0, most = 0;
  std::vector<int> order;
  test::run([&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    Credits credits(ex, 1);
    TaskGroup group(ex, [] {});
    for (int id = 0; id < 6; ++id) group.spawn(hold(credits, holders, most, order, id));
    Status all = co_await group.join();
    CHECK(all.has_value());
    CHECK(credits.in_use() == 0);
    CHECK(credits.high_water() == 1);
  }());
  CHECK(most == 1);
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("several credits: never more holders than credits, and all of them used") {
  std::size_t holders = 0, most = 0;
  std::vector<int> order;
  test::run([&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    Credits credits(ex, 3);
    TaskGroup group(ex, [] {});
    for (int id = 0; id < 10; ++id) group.spawn(hold(credits, holders, most, order, id));
    CHECK((co_await group.join()).has_value());
    CHECK(credits.in_use() == 0);
  }());
  CHECK(most == 3);
  CHECK(order.size() == 10);
}

TEST_CASE("a holder that fails still gives its credit back") {
  test::run([&]() -> awaitable<void> {
    Credits credits(co_await asio::this_coro::executor, 1);
    Status failed = co_await fail_while_holding(credits);
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().message == "the write failed");
    CHECK(credits.in_use() == 0);
    // The next one gets it at once.
    CHECK((co_await credits.acquire()).has_value());
    CHECK(credits.in_use() == 1);
    credits.release();
  }());
}

TEST_CASE("close() wakes a waiter with a cancellation and refuses later acquires") {
  bool woke_cancelled = false;
  test::run([&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    Credits credits(ex, 1);
    REQUIRE((co_await credits.acquire()).has_value());
    TaskGroup group(ex, [] {});
    group.spawn(wait_for_credit(credits, woke_cancelled));
    co_await sleep_ms(1);
    credits.close();
    CHECK((co_await group.join()).has_value());
    CHECK_FALSE((co_await credits.acquire()).has_value());
  }());
  CHECK(woke_cancelled);
}
