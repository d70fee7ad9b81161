#include <doctest/doctest.h>

#include <chrono>
#include <random>
#include <vector>

#include "engine/buffer_pool.hpp"
#include "engine/task_group.hpp"
#include "run_loop.hpp"

using namespace sluice;

TEST_CASE("the pool hands out aligned blocks with headroom") {
  asio::io_context context(1);
  BufferPool pool(context.get_executor(), 2, 65536);
  auto buffer = test::run(context, pool.acquire());
  REQUIRE(buffer);
  CHECK(buffer->size() == 65536);
  CHECK(buffer->headroom() == BufferPool::default_headroom);
  CHECK(reinterpret_cast<std::uintptr_t>(buffer->bytes().data()) % 4096 == 0);
  CHECK(pool.in_use() == 1);
  *buffer = Buffer{};
  CHECK(pool.in_use() == 0);
}

TEST_CASE("an acquire waits until a block comes back") {
  asio::io_context context(1);
  BufferPool pool(context.get_executor(), 1, 4096);
  std::vector<int> events;
  auto holder = [&]() -> awaitable<Status> {
    auto b = co_await pool.acquire();
    events.push_back(1);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
    co_await t.async_wait(use_nothrow);
    events.push_back(2);
    co_return Status{};  // b released here
  };
  auto waiter = [&]() -> awaitable<Status> {
    auto b = co_await pool.acquire();
    events.push_back(3);
    co_return Status{};
  };
  auto both = [&]() -> awaitable<Status> {
    TaskGroup group(co_await asio::this_coro::executor);
    group.spawn(holder());
    group.spawn(waiter());
    co_return co_await group.join();
  };
  CHECK(test::run(context, both()));
  CHECK(events == std::vector<int>{1, 2, 3});
  CHECK(pool.high_water() == 1);
}

TEST_CASE("closing the pool fails waiting acquires") {
  asio::io_context context(1);
  BufferPool pool(context.get_executor(), 1, 4096);
  auto task = [&]() -> awaitable<Status> {
    auto first = co_await pool.acquire();
    asio::post(context, [&] { pool.close(); });
    auto second = co_await pool.acquire();
    CHECK_FALSE(second);
    if (!second) CHECK(second.error().is_cancellation());
    co_return Status{};
  };
  CHECK(test::run(context, task()));
}

TEST_CASE("under stress with shuffled completions the in-flight bound holds") {
  constexpr std::size_t count = 8;
  asio::io_context context(1);
  BufferPool pool(context.get_executor(), count, 4096);
  std::mt19937 rng(42);
  std::size_t max_seen = 0;
  std::size_t completed = 0;
  auto user = [&](int delay_us) -> awaitable<Status> {
    auto b = co_await pool.acquire();
    if (!b) co_return tl::unexpected(b.error());
    max_seen = std::max(max_seen, pool.in_use());
    CHECK(pool.in_use() <= count);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::microseconds(delay_us));
    co_await t.async_wait(use_nothrow);
    ++completed;
    co_return Status{};
  };
  auto all = [&]() -> awaitable<Status> {
    TaskGroup group(co_await asio::this_coro::executor);
    for (int i = 0; i < 2000; ++i) group.spawn(user(static_cast<int>(rng() % 500)));
    co_return co_await group.join();
  };
  CHECK(test::run(context, all()));
  CHECK(completed == 2000);
  CHECK(max_seen == count);
  CHECK(pool.high_water() == count);
  CHECK(pool.allocated() == count);
  CHECK(pool.in_use() == 0);
}
