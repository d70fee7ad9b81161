#include "engine/grace_period.hpp"

#include <string>

namespace sluice {

GracePeriod::GracePeriod(executor ex, std::chrono::milliseconds length, std::function<void()> cut_off)
    : timer_(ex), length_(length), cut_off_(std::move(cut_off)) {}

GracePeriod::~GracePeriod() { end(); }

void GracePeriod::start() {
  if (started_ || !*live_) return;
  started_ = true;
  timer_.expires_after(length_);
  timer_.async_wait([this, live = live_](const asio::error_code& ec) {
    if (ec || !*live) return;
    *live = false;
    expired_ = true;
    if (cut_off_) cut_off_();
  });
}

void GracePeriod::end() {
  *live_ = false;
  timer_.cancel();
}

std::string describe_grace(std::chrono::milliseconds length) {
  const auto ms = length.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

}  // namespace sluice
