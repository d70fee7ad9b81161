// StopSignals: SIGINT and SIGTERM as a long-running service takes them. The first asks
// it to wind down (on_stop); each later one goes to on_again, which may cut short what
// is still in flight. When the service has finished, finish() ends the waiting for
// good.
//
// "For good" is the point of this class: a signal that arrives while the service is
// finishing can have its completion queued before finish() cancels the wait, and run
// after it. Waiting again from that late completion would keep the event loop, and so
// the process, alive with nothing left to stop (`sluice serve` once hung that way
// after two quick SIGTERMs).
#pragma once

#include <asio/signal_set.hpp>
#include <functional>

#include "engine/asio.hpp"

namespace sluice {

class StopSignals {
 public:
  StopSignals(executor ex, std::function<void()> on_stop, std::function<void()> on_again);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The service is done: no more waiting, and signals handled from now on are ignored.
  void finish();
  bool stopping() const { return stopping_; }

  // What the wait completes with, one signal (or the cancellation) at a time. Public so
  // that a test can hand in a completion that was queued before finish(), which a real
  // signal reaches only by timing.
  void deliver(const asio::error_code& ec);

 private:
  void wait();

  asio::signal_set signals_;
  std::function<void()> on_stop_;
  std::function<void()> on_again_;
  bool stopping_ = false;
  bool finished_ = false;
};

// SIGINT and SIGTERM held pending (blocked) in the calling thread and in the threads it
// starts from then on, or let through again. A service holds them while it sets up, so
// that a stop signal waits for the StopSignals that will take it instead of killing the
// process half set up (its socket file left behind), and again once it has finished, so
// that a late one cannot turn a clean exit into a death by signal (asio puts back the
// default action when the signal_set goes).
void hold_stop_signals();
void release_stop_signals();

}  // namespace sluice
