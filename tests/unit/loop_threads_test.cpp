#include <doctest/doctest.h>

#include <pthread.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/loop_threads.hpp"
#include "engine/run_on.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {
// What a coroutine spawned on a loop sees of the thread it runs on.
struct Seen {
  std::thread::id thread;
  std::string name;
};

awaitable<Seen> where_am_i(int delay_ms) {
  asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(delay_ms));
  co_await t.async_wait(use_nothrow);
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  co_return Seen{std::this_thread::get_id(), name};
}
}  // namespace

TEST_CASE("each loop runs on its own named thread, and a coroutine awaiting work there resumes at home") {
  LoopThreads loops(3);
  REQUIRE(loops.size() == 3);
  loops.start();
  std::vector<Seen> seen;
  std::thread::id home;
  std::set<std::thread::id> resumed_on;
  test::run([&]() -> awaitable<void> {
    home = std::this_thread::get_id();
    for (std::size_t i = 0; i < loops.size(); ++i) {
      seen.push_back(co_await asio::co_spawn(loops.at(i), where_am_i(5), asio::use_awaitable));
      resumed_on.insert(std::this_thread::get_id());
    }
  }());
  loops.stop();
  REQUIRE(seen.size() == 3);
  std::set<std::thread::id> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.insert(seen[i].thread);
    CHECK(seen[i].thread != home);
    CHECK(seen[i].name == "sluice-loop" + std::to_string(i + 1));
  }
  CHECK(threads.size() == 3);
  CHECK(resumed_on == std::set<std::thread::id>{home});
}

TEST_CASE("stop lets each loop finish the work it has before the threads are joined") {
  LoopThreads loops(2);
  loops.start();
  int finished = 0;  // written by the loops' threads, read after the join
  std::vector<int> done(2, 0);
  for (std::size_t i = 0; i < loops.size(); ++i)
    asio::co_spawn(loops.at(i), where_am_i(50), [&done, i](std::exception_ptr, Seen) { done[i] = 1; });
  loops.stop();
  for (int d : done) finished += d;
  CHECK(finished == 2);
}

TEST_CASE("run_on runs the work on the target loop, resumes at home, and stays inline for its own loop") {
  LoopThreads loops(1);
  loops.start();
  std::thread::id home, after_remote, after_local;
  Seen remote, local;
  test::run([&]() -> awaitable<void> {
    home = std::this_thread::get_id();
    remote = co_await run_on(loops.at(0), where_am_i(1));
    after_remote = std::this_thread::get_id();
    local = co_await run_on(co_await asio::this_coro::executor, where_am_i(1));
    after_local = std::this_thread::get_id();
    // awaitable<void> takes the same path.
    std::thread::id void_thread;
    co_await run_on(loops.at(0), [](std::thread::id& out) -> awaitable<void> {
      out = std::this_thread::get_id();
      co_return;
    }(void_thread));
    CHECK(void_thread == remote.thread);
  }());
  loops.stop();
  CHECK(remote.thread != home);
  CHECK(remote.name == "sluice-loop1");
  CHECK(after_remote == home);
  CHECK(local.thread == home);
  CHECK(after_local == home);
}
