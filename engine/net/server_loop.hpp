// ServerLoop: accepts connections and hands each to a handler coroutine, the part of
// every receiving service (Chunked, raw, NBD) that is not protocol.
//
//  - A tls:// listener runs the TLS handshake before the handler sees the stream
//    (NBD instead negotiates STARTTLS itself, on a plain stream).
//  - At most `max_connections` at once; more are accepted and closed (after at most
//    a quarter second's wait for a slot being given back), so a client learns it was
//    refused instead of hanging in the backlog.
//  - stop() (SIGTERM, SIGINT) stops accepting; run() then waits for the connections
//    in progress, which the handlers finish cleanly.
//  - With `once`, the first connection is the only one and its result is run()'s.
//    Without it, a failed connection is reported and the loop goes on.
//  - Connections may be served on other event loops (workers, one per thread): the
//    socket moves to the worker's loop, which runs the TLS handshake and the handler
//    there, while accepting, counting and reporting stay on this loop's thread. Each
//    worker brings its own handler, so nothing a handler touches is shared between
//    threads.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <asio/steady_timer.hpp>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/address.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"
#include "engine/task_group.hpp"

namespace sluice {

using ConnectionHandler = std::function<awaitable<Status>(std::unique_ptr<Stream>)>;

// An event loop that serves connections, and its handler for them.
struct ServerWorker {
  executor ex;
  ConnectionHandler handler;
};

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
  // Connections are served on the acceptor's loop.
  ServerLoop(Acceptor acceptor, ConnectionHandler handler, ServerLoopOptions options);
  // Connections go to the worker serving the fewest at the time (at least one worker).
  ServerLoop(Acceptor acceptor, std::vector<ServerWorker> workers, ServerLoopOptions options);

  awaitable<Status> run();
  void stop();

  std::size_t active() const { return active_; }
  std::size_t served() const { return served_; }

 private:
  awaitable<Status> serve_one(Socket socket);
  // On the worker's loop: the TLS handshake if any, then the handler.
  awaitable<Status> serve_on_worker(Socket socket, const ConnectionHandler& handler);
  std::size_t pick_worker() const;
  // At the connection limit: a moment's grace for a slot that is being given back.
  awaitable<void> wait_for_a_slot();
  // Errors accept() can return while the process or system is short of descriptors or
  // memory: worth waiting out, not ending the server for.
  static bool is_transient_accept_error(const asio::error_code& ec);

  Acceptor acceptor_;
  asio::steady_timer slot_freed_;  // what wait_for_a_slot() waits on
  std::vector<ServerWorker> workers_;
  std::vector<std::size_t> worker_load_;  // connections each worker is serving
  ServerLoopOptions options_;
  std::size_t active_ = 0;
  std::size_t served_ = 0;
  bool stopping_ = false;
  bool accept_starved_ = false;  // said once per spell of transient accept errors
};

}  // namespace sluice
