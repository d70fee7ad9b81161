#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <optional>

#include "engine/stop_signals.hpp"

using namespace sluice;

namespace {

// Runs the loop until `done` holds (true) or 5 s pass (false).
template <typename Done>
bool run_until(asio::io_context& context, Done done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < limit) context.run_one_for(std::chrono::milliseconds(100));
  return done();
}

// Whether the loop ran out of work (rather than waiting 2 s for something).
bool runs_out_of_work(asio::io_context& context) {
  context.restart();
  context.run_for(std::chrono::seconds(2));
  return context.stopped();
}

}  // namespace

TEST_CASE("the first signal stops, later ones go to on_again, finish() ends the waiting") {
  asio::io_context context;
  int stops = 0, agains = 0;
  StopSignals signals(context.get_executor(), [&] { ++stops; }, [&] { ++agains; });
  CHECK_FALSE(signals.stopping());
  REQUIRE(std::raise(SIGTERM) == 0);
  REQUIRE(run_until(context, [&] { return stops == 1; }));
  CHECK(signals.stopping());
  CHECK(agains == 0);
  REQUIRE(std::raise(SIGINT) == 0);
  REQUIRE(run_until(context, [&] { return agains == 1; }));
  REQUIRE(std::raise(SIGTERM) == 0);
  REQUIRE(run_until(context, [&] { return agains == 2; }));
  CHECK(stops == 1);
  signals.finish();
  CHECK(runs_out_of_work(context));
}

TEST_CASE("a signal whose completion was queued before finish() is ignored and waits no more") {
  // The race `sluice serve` lost after two quick SIGTERMs: the second one's completion
  // was already queued when the server finished and cancelled the wait; run after the
  // cancel, it waited again, and the loop never ran out of work.
  asio::io_context context;
  int stops = 0, agains = 0;
  StopSignals signals(context.get_executor(), [&] { ++stops; }, [&] { ++agains; });
  REQUIRE(std::raise(SIGTERM) == 0);
  REQUIRE(run_until(context, [&] { return stops == 1; }));
  signals.finish();
  signals.deliver(asio::error_code{});  // the late completion
  CHECK(agains == 0);
  CHECK(runs_out_of_work(context));
}

TEST_CASE("a service that finishes from its stop handler is not waited for again") {
  asio::io_context context;
  int stops = 0;
  std::optional<StopSignals> signals;
  signals.emplace(context.get_executor(), [&] { ++stops; signals->finish(); }, [] { FAIL("no second signal was sent"); });
  REQUIRE(std::raise(SIGTERM) == 0);
  REQUIRE(run_until(context, [&] { return stops == 1; }));
  CHECK(runs_out_of_work(context));
}

TEST_CASE("signals before any other work: an unfinished StopSignals keeps the loop waiting") {
  // The control for the checks above: without finish(), the wait is work.
  asio::io_context context;
  StopSignals signals(context.get_executor(), [] {}, [] {});
  context.run_for(std::chrono::milliseconds(200));
  CHECK_FALSE(context.stopped());
  signals.finish();
  CHECK(runs_out_of_work(context));
}
