#include "engine/credits.hpp"

#include <cassert>

namespace sluice {

Credits::Credits(executor ex, std::size_t count) : tokens_(ex, count), total_(count) {
  for (std::size_t i = 0; i < count; ++i) tokens_.try_send(asio::error_code{}, true);
}

awaitable<Status> Credits::acquire() {
  auto [ec, token] = co_await tokens_.async_receive(use_nothrow);
  (void)token;
  if (ec) co_return cancelled();
  ++in_use_;
  if (in_use_ > high_water_) high_water_ = in_use_;
  co_return Status{};
}

void Credits::release() {
  assert(in_use_ > 0);
  --in_use_;
  // Cannot fail: at most `total_` tokens exist. After close() the token is dropped.
  tokens_.try_send(asio::error_code{}, true);
}

void Credits::close() {
  tokens_.cancel();
  tokens_.close();
}

}  // namespace sluice
