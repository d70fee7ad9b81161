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

// `holders` coroutines share `count` credits, each holding one across a wait.
struct Turns {
  std::size_t most = 0;          // holders at once, at the most
  std::vector<int> order;        // who held a credit, in order
  std::size_t in_use_after = 0;  // credits still taken once all have finished
  std::size_t high_water = 0;
  bool all_succeeded = false;
};

Turns take_turns(std::size_t count, int holders) {
  Turns turns;
  std::size_t holding = 0;
  test::run([&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    Credits credits(ex, count);
    TaskGroup group(ex, [](const Error&) {});
    for (int id = 0; id < holders; ++id) group.spawn(hold(credits, holding, turns.most, turns.order, id));
    turns.all_succeeded = (co_await group.join()).has_value();
    turns.in_use_after = credits.in_use();
    turns.high_water = credits.high_water();
  }());
  return turns;
}

}  // namespace

TEST_CASE("one credit: holders take turns, in the order they asked") {
  Turns turns = take_turns(1, 6);
  CHECK(turns.all_succeeded);
  CHECK(turns.in_use_after == 0);
  CHECK(turns.high_water == 1);
  CHECK(turns.most == 1);
  CHECK(turns.order == std::vector<int>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("several credits: never more holders than credits, and all of them used") {
  Turns turns = take_turns(3, 10);
  CHECK(turns.all_succeeded);
  CHECK(turns.in_use_after == 0);
  CHECK(turns.most == 3);
  CHECK(turns.order.size() == 10);
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
    TaskGroup group(ex, [](const Error&) {});
    group.spawn(wait_for_credit(credits, woke_cancelled));
    co_await sleep_ms(1);
    credits.close();
    CHECK((co_await group.join()).has_value());
    CHECK_FALSE((co_await credits.acquire()).has_value());
  }());
  CHECK(woke_cancelled);
}
