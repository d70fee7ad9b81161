#include "protocols/common/peer_close.hpp"

#include <array>
#include <system_error>

namespace sluice {

awaitable<Status> wait_for_peer_close(Stream& stream, std::chrono::milliseconds limit) {
  asio::steady_timer deadline(co_await asio::this_coro::executor, limit);
  deadline.async_wait([&stream](asio::error_code ec) {
    if (!ec) stream.abort();  // the receiver never closed; go on without it
  });
  // The socket's own ECONNRESET, as Asio reports it (in its own category), not the
  // generic code a TLS stream uses for a peer that closed without close_notify (which
  // is still a close).
  const std::error_code reset = asio::error::connection_reset;
  std::array<std::byte, 4096> scratch{};
  Status status;
  for (;;) {
    auto n = co_await stream.read_some(scratch);
    if (!n && n.error().code == reset)
      status = fail(std::errc::connection_reset,
                    stream.peer() + " reset the connection after the last byte instead of closing it: the receiver " +
                        "did not take the transfer whole (its log says why)");
    // A TLS alert: under TLS 1.3 the client's handshake is over before the server has
    // judged the client's certificate, so a receiver that refuses it says so only now,
    // after every byte was sent into a session it never accepted.
    if (!n && n.error().code == std::errc::protocol_error)
      status = fail(std::errc::protocol_error,
                    "the receiver refused the TLS session, so it took none of the data: " + n.error().message);
    if (!n || *n == 0) break;
  }
  deadline.cancel();
  co_return status;
}

awaitable<OneWayEnd> end_one_way_stream(Stream& stream, Status sent) {
  // A raw receiver learns the stream's end from the FIN (a short image is then an
  // error at once, not after the wait below); a Chunked one ignores it.
  if (sent) stream.finish_sending();
  if (sent) sent = co_await wait_for_peer_close(stream, default_peer_close_wait);
  if (sent) co_await stream.close();
  OneWayEnd end{stream.stats(), sent};
  if (!sent) stream.abort();
  co_return end;
}

}  // namespace sluice
