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

std::uint64_t IdleWatch::received() const { return reader_.received(); }

void IdleWatch::arm() {
  // Due `limit` after the last arrival, so a sender is dropped that long after its
  // last byte, not anywhere up to twice that.
  timer_.expires_at(reader_.last_arrival() + limit_);
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
