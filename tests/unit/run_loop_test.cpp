// The test harness itself: a body that waits forever must fail its test case, not pass.
#include "run_loop.hpp"

#include <doctest/doctest.h>

namespace sluice {
namespace {

// Suspends on an operation whose completion handler is dropped: nothing will ever
// resume it, and the loop, with no work left, returns.
awaitable<void> wait_forever() {
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>([](auto&&) {}, asio::use_awaitable);
}

awaitable<int> value_that_never_comes() {
  co_await wait_forever();
  co_return 42;
}

awaitable<void> finish_at_once() { co_return; }

awaitable<int> answer() { co_return 42; }

}  // namespace

TEST_CASE("run_until_idle tells a finished coroutine from one stuck waiting") {
  asio::io_context context(1);
  CHECK(test::run_until_idle(context, finish_at_once()));
  CHECK(test::run_until_idle(context, answer()) == 42);
  CHECK_FALSE(test::run_until_idle(context, wait_forever()));
  CHECK_FALSE(test::run_until_idle(context, value_that_never_comes()).has_value());
}

// should_fail: these cases pass only if run() fails them, as it must.
TEST_CASE("run fails the test case when the body never finishes" * doctest::should_fail()) {
  test::run(wait_forever());
}

TEST_CASE("run fails the test case, reading nothing, when the value never comes" * doctest::should_fail()) {
  asio::io_context context(1);
  static_cast<void>(test::run(context, value_that_never_comes()));
}

}  // namespace sluice
