#include "protocols/common/trailing_bytes.hpp"

#include <memory>

#include <asio/steady_timer.hpp>

namespace sluice {

namespace {

// Outlives the coroutine: the timer's handler may run after it returned.
struct GraceState {
  bool waiting = true;
  bool expired = false;
};

}  // namespace

awaitable<Result<std::size_t>> bytes_follow(StreamReader& reader, std::chrono::milliseconds grace) {
  if (reader.buffered() > 0) co_return reader.buffered();
  auto state = std::make_shared<GraceState>();
  asio::steady_timer timer(co_await asio::this_coro::executor, grace);
  timer.async_wait([state, &stream = reader.stream()](const asio::error_code& ec) {
    if (ec || !state->waiting) return;
    state->expired = true;
    stream.stop_receiving();
  });
  auto more = co_await reader.peek();
  state->waiting = false;
  timer.cancel();
  if (state->expired) co_return 0;
  if (!more) co_return tl::unexpected(more.error());
  co_return more->size();
}

}  // namespace sluice
