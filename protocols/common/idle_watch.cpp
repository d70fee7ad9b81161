#include "protocols/common/idle_watch.hpp"

namespace sluice {

IdleWatch::IdleWatch(executor ex, StreamReader& reader, std::chrono::seconds limit)
    : timer_(ex), reader_(reader), limit_(limit), seen_(received()) {
  if (limit_.count() > 0) arm();
}

IdleWatch::~IdleWatch() {
  *alive_ = false;
  timer_.cancel();
}

std::uint64_t IdleWatch::received() const {
  return reader_.position() + reader_.buffered();
}

void IdleWatch::arm() {
  timer_.expires_after(limit_);
  timer_.async_wait([this, alive = alive_](const asio::error_code& ec) {
    if (ec || !*alive) return;
    if (received() == seen_) {
      expired_ = true;
      reader_.stream().stop_receiving();
      return;
    }
    seen_ = received();
    arm();
  });
}

}  // namespace sluice
