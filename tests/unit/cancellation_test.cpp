#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include <asio/steady_timer.hpp>

#include "engine/cancellation.hpp"
#include "run_loop.hpp"

using namespace sluice;

TEST_CASE("a request from another thread runs the callback on the subscriber's loop") {
  asio::io_context context(1);
  Cancellation cancellation;
  std::thread::id ran_on;
  int runs = 0;
  auto subscription = cancellation.on_request(context.get_executor(), [&] {
    ran_on = std::this_thread::get_id();
    ++runs;
    context.stop();
  });
  std::thread other([&] {
    cancellation.request();
    cancellation.request();  // a second request changes nothing
  });
  // Keeps the loop running until the callback stops it.
  auto guard = asio::make_work_guard(context);
  context.run();
  other.join();
  CHECK(cancellation.requested());
  CHECK(runs == 1);
  CHECK(ran_on == std::this_thread::get_id());
}

TEST_CASE("a subscription made after the request runs at once; a destroyed one never runs") {
  asio::io_context context(1);
  Cancellation cancellation;
  int late = 0, gone = 0;
  {
    auto dropped = cancellation.on_request(context.get_executor(), [&] { ++gone; });
  }
  auto kept_until_posted = cancellation.on_request(context.get_executor(), [&] { ++gone; });
  cancellation.request();  // posts it...
  kept_until_posted.reset();  // ...but it is gone before the loop runs it
  auto after = cancellation.on_request(context.get_executor(), [&] { ++late; });
  context.run();
  CHECK(late == 1);
  CHECK(gone == 0);
}

TEST_CASE("many threads subscribing, unsubscribing and requesting at once") {
  // Run under the sanitizers, this is what would show a race.
  for (int round = 0; round < 50; ++round) {
    asio::io_context context(1);
    Cancellation cancellation;
    std::atomic<int> runs{0};
    std::vector<Cancellation::Subscription> subscriptions;
    for (int i = 0; i < 8; ++i)
      subscriptions.push_back(cancellation.on_request(context.get_executor(), [&] { ++runs; }));
    std::thread requester([&] { cancellation.request(); });
    subscriptions.erase(subscriptions.begin(), subscriptions.begin() + 4);
    requester.join();
    context.run();
    // Whether the request came before or after the erase, the four dropped ones are
    // gone before the loop runs: only the kept four run.
    CHECK(runs.load() == 4);
  }
  CHECK(cancelled_error().is_cancellation());
}
