#include "engine/stop_signals.hpp"

#include <pthread.h>

#include <csignal>

namespace sluice {

StopSignals::StopSignals(executor ex, std::function<void()> on_stop, std::function<void()> on_again)
    : signals_(ex, SIGINT, SIGTERM), on_stop_(std::move(on_stop)), on_again_(std::move(on_again)) {
  wait();
}

void StopSignals::wait() {
  // A cancelled wait may complete after this object is gone: it must not touch it.
  signals_.async_wait([this](const asio::error_code& ec, int) {
    if (ec != asio::error::operation_aborted) deliver(ec);
  });
}

void StopSignals::finish() {
  finished_ = true;
  asio::error_code ignored;
  signals_.cancel(ignored);
}

void StopSignals::deliver(const asio::error_code& ec) {
  if (ec || finished_) return;
  if (!stopping_) {
    stopping_ = true;
    if (on_stop_) on_stop_();
  } else if (on_again_) {
    on_again_();
  }
  // on_stop or on_again may have finished the service.
  if (!finished_) wait();
}

namespace {

void mask_stop_signals(int how) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(how, &set, nullptr);
}

}  // namespace

void hold_stop_signals() { mask_stop_signals(SIG_BLOCK); }
void release_stop_signals() { mask_stop_signals(SIG_UNBLOCK); }

}  // namespace sluice
