#include "protocols/nbd/server/nbd_server.hpp"

#include <sys/socket.h>

#include <asio/steady_timer.hpp>

#include "engine/net/socket_stream.hpp"
#include "protocols/nbd/server/handshake.hpp"
#include "protocols/nbd/server/transmission.hpp"

namespace sluice::nbd {

namespace {

int socket_of(Stream& stream) {
  auto* plain = dynamic_cast<SocketStream*>(&stream);
  return plain ? plain->socket().native_handle() : -1;
}

}  // namespace

NbdServer::NbdServer(ServerConfig config) : config_(std::move(config)) {}

void NbdServer::stop() {
  stopping_ = true;
  for (Connection* c : live_) {
    if (c->transmission != nullptr)
      c->transmission->stop();
    else if (c->fd >= 0)
      ::shutdown(c->fd, SHUT_RDWR);  // still negotiating: nothing in flight to finish
  }
}

awaitable<Status> NbdServer::serve(std::unique_ptr<Stream> stream, ServingGate& gate) {
  auto ex = co_await asio::this_coro::executor;
  Connection connection;
  connection.fd = socket_of(*stream);
  if (stopping_) co_return Status{};
  live_.push_front(&connection);
  struct Unlist {
    std::list<Connection*>& live;
    std::list<Connection*>::iterator at;
    ~Unlist() { live.erase(at); }
  } unlist{live_, live_.begin()};

  // The fd stays the same after STARTTLS: the TLS stream takes over the same socket.
  // What the timer's handler may touch: it can run after this frame is gone (a
  // handler already queued when the timer is cancelled still runs).
  struct Deadline {
    int fd;
    bool over = false;
    bool expired = false;
  };
  auto state = std::make_shared<Deadline>(Deadline{connection.fd});
  asio::steady_timer deadline(ex, config_.handshake_timeout);
  deadline.async_wait([state](const asio::error_code& ec) {
    if (ec || state->over) return;
    state->expired = true;
    if (state->fd >= 0) ::shutdown(state->fd, SHUT_RDWR);
  });
  auto negotiated = co_await negotiate(stream, config_, gate);
  state->over = true;
  deadline.cancel();
  if (state->expired)
    co_return fail(std::errc::timed_out, "dropped: no export chosen within " +
                                             std::to_string(config_.handshake_timeout.count() / 1000) +
                                             " s (--handshake-timeout)");
  if (!negotiated) {
    if (stopping_) co_return Status{};
    // Gone before choosing an export: a probe that connects and hangs up (often before
    // the greeting is sent, or with it unread, so a broken pipe or a reset) has ended
    // its session as surely as one that closed cleanly, and is not an error either.
    if (negotiated.error().is_peer_gone()) co_return Status{};
    co_return tl::unexpected(negotiated.error());
  }
  if (!*negotiated) {  // the client ended the session during the handshake
    co_await stream->close();
    co_return Status{};
  }

  const int fd = connection.fd;
  Transmission transmission(ex, *stream, **negotiated, config_, [fd] {
    if (fd >= 0) ::shutdown(fd, SHUT_RD);
  });
  connection.transmission = &transmission;
  if (stopping_) transmission.stop();
  Status served = co_await transmission.run();
  connection.transmission = nullptr;

  Status flushed;
  if (transmission.wrote()) flushed = co_await (*negotiated)->chosen->image->flush();
  Status closed = co_await stream->close();
  if (!served) co_return served;
  if (!flushed) co_return flushed;
  (void)closed;  // the client may already be gone after DISC; nothing is lost
  co_return Status{};
}

}  // namespace sluice::nbd
