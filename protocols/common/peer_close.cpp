#include "protocols/common/peer_close.hpp"

#include <array>

namespace sluice {

awaitable<void> wait_for_peer_close(Stream& stream, std::chrono::milliseconds limit) {
  asio::steady_timer deadline(co_await asio::this_coro::executor, limit);
  deadline.async_wait([&stream](asio::error_code ec) {
    if (!ec) stream.abort();  // the receiver never closed; go on without it
  });
  std::array<std::byte, 4096> scratch{};
  for (;;) {
    auto n = co_await stream.read_some(scratch);
    if (!n || *n == 0) break;
  }
  deadline.cancel();
}

awaitable<StreamStats> end_one_way_stream(Stream& stream, bool sent_everything) {
  if (!sent_everything) {
    stream.abort();
    co_return stream.stats();
  }
  co_await wait_for_peer_close(stream, default_peer_close_wait);
  co_await stream.close();
  co_return stream.stats();
}

}  // namespace sluice
