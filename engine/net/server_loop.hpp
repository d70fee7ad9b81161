// ServerLoop: accepts connections and hands each to a handler coroutine, the part of
// every receiving service (Chunked, raw, NBD) that is not protocol.
//
//  - A tls:// listener runs the TLS handshake before the handler sees the stream
//    (NBD instead negotiates STARTTLS itself, on a plain stream).
//  - At most `max_connections` at once; more are accepted and closed at once, so a
//    client learns it was refused instead of hanging in the backlog.
//  - stop() (SIGTERM, SIGINT) stops accepting; run() then waits for the connections
//    in progress, which the handlers finish cleanly.
//  - With `once`, the first connection is the only one and its result is run()'s.
//    Without it, a failed connection is reported and the loop goes on.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/address.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"
#include "engine/task_group.hpp"

namespace sluice {

using ConnectionHandler = std::function<awaitable<Status>(std::unique_ptr<Stream>)>;

struct ServerLoopOptions {
  bool once = false;
  std::size_t max_connections = 16;
  std::shared_ptr<TlsContext> tls;  // handshake every connection first (tls:// listeners)
  StreamOptions stream;
  std::chrono::seconds handshake_timeout{30};
  // Where failed connections are reported when not `once` (default: stderr).
  std::function<void(const Error&)> report;
};

class ServerLoop {
 public:
  ServerLoop(Acceptor acceptor, ConnectionHandler handler, ServerLoopOptions options);

  awaitable<Status> run();
  void stop();

  std::size_t active() const { return active_; }
  std::size_t served() const { return served_; }

 private:
  awaitable<Status> serve_one(Socket socket);

  Acceptor acceptor_;
  ConnectionHandler handler_;
  ServerLoopOptions options_;
  std::size_t active_ = 0;
  std::size_t served_ = 0;
  bool stopping_ = false;
};

}  // namespace sluice
