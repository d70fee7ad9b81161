// GracePeriod: how long work already under way may take to finish once a stop has
// been asked for (a cancellation, a signal, a failure elsewhere), before it is cut off.
//
// Stopping gently lets the peer see a clean end (an NBD client reads every reply, then
// sends NBD_CMD_DISC; a server answers what it took in), where cutting a connection
// with requests in flight has taken servers down with it (nbdkit 1.32.5 asserts in
// raw_send_socket). The limit keeps a peer that stopped answering from holding the
// stop up for ever.
#pragma once

#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "engine/asio.hpp"

namespace sluice {

class GracePeriod {
 public:
  // `cut_off` runs on `ex` when a started period runs out before end().
  GracePeriod(executor ex, std::chrono::milliseconds length, std::function<void()> cut_off);
  ~GracePeriod();
  GracePeriod(const GracePeriod&) = delete;
  GracePeriod& operator=(const GracePeriod&) = delete;

  // Starts the period; later calls change nothing. On the executor's thread.
  void start();
  // What was under way has finished: cut_off will not run.
  void end();

  bool started() const { return started_; }
  // The period ran out and cut_off ran.
  bool expired() const { return expired_; }
  std::chrono::milliseconds length() const { return length_; }

 private:
  asio::steady_timer timer_;
  std::chrono::milliseconds length_;
  std::function<void()> cut_off_;
  // False once this object is gone or ended: a timer handler already queued when the
  // timer was cancelled still runs, and must not touch it then.
  std::shared_ptr<bool> live_ = std::make_shared<bool>(true);
  bool started_ = false;
  bool expired_ = false;
};

// "5 s", "1500 ms": a grace period as messages name it.
std::string describe_grace(std::chrono::milliseconds length);

}  // namespace sluice
