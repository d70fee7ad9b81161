#include "engine/cancellation.hpp"

#include <utility>

namespace sluice {

void Cancellation::request() {
  std::lock_guard lock(mutex_);
  if (requested_.exchange(true, std::memory_order_acq_rel)) return;
  // Under the lock: a subscriber unsubscribing meanwhile waits, so no callback posts
  // for a subscription that is already gone. Callbacks only post; they never block.
  for (auto& subscriber : subscribers_) subscriber.second();
  subscribers_.clear();
}

Cancellation::Subscription Cancellation::on_request(executor ex, std::function<void()> callback) {
  auto alive = std::make_shared<bool>(true);
  auto post = [ex, alive, callback = std::move(callback)] {
    asio::post(ex, [alive, callback] {
      if (*alive) callback();
    });
  };
  std::lock_guard lock(mutex_);
  if (requested_.load(std::memory_order_acquire)) {
    post();
    return Subscription(nullptr, 0, std::move(alive));
  }
  const std::uint64_t id = next_id_++;
  subscribers_.emplace(id, std::move(post));
  return Subscription(this, id, std::move(alive));
}

void Cancellation::unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  subscribers_.erase(id);
}

Cancellation::Subscription& Cancellation::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = std::exchange(other.id_, 0);
    alive_ = std::move(other.alive_);
  }
  return *this;
}

void Cancellation::Subscription::reset() {
  if (owner_ != nullptr) owner_->unsubscribe(id_);
  owner_ = nullptr;
  if (alive_) *alive_ = false;
  alive_.reset();
}

Error cancelled_error() {
  return Error{std::make_error_code(std::errc::operation_canceled), "the transfer was cancelled"};
}

}  // namespace sluice
