// ServerLoop: accepts connections and hands each to a handler coroutine, the part of
// every receiving service (Chunked, raw, NBD) that is not protocol.
//
//  - A tls:// listener runs the TLS handshake before the handler sees the stream
//    (NBD instead negotiates STARTTLS itself, on a plain stream).
//  - Connections are counted in two kinds: those still in their handshake (the TLS
//    handshake, NBD's option haggling; a handler says when its own is over through its
//    ServingGate) and those being served. Clients that connect and never finish their
//    handshake therefore cannot take the slots of those that do.
//  - At most `max_handshakes` in the handshake at once: one more is refused at once, in
//    a task of its own so that refusals never queue behind each other, and in its
//    protocol's words where the protocol has some (`refuse`: NBD answers its options
//    with an error naming the limit).
//  - At most `max_connections` served at once: a handshake that ends while all are
//    taken waits a moment for a slot being given back (see claim_serving_slot()), then
//    the gate says no and the handler refuses the client.
//  - Refusals, and handshakes that fail, are reported at most once per interval each,
//    then in one line with a count (ReportLimiter): a flood of bad clients cannot
//    flood the log. Failures of connections being served are each reported.
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

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/address.hpp"
#include "engine/net/report_limiter.hpp"
#include "engine/net/serving_gate.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"
#include "engine/task_group.hpp"

namespace sluice {

using ConnectionHandler = std::function<awaitable<Status>(std::unique_ptr<Stream>, ServingGate&)>;

// Turns a client away in its protocol's words: `reason` says why, for its user.
using ConnectionRefuser = std::function<awaitable<void>(Stream&, const std::string& reason)>;

// An event loop that serves connections, and its handler for them.
struct ServerWorker {
  executor ex;
  ConnectionHandler handler;
};

struct ServerLoopOptions {
  bool once = false;
  std::size_t max_connections = 16;  // served at once
  std::size_t max_handshakes = 64;   // still in their handshake at once
  std::shared_ptr<TlsContext> tls;  // handshake every connection first (tls:// listeners)
  StreamOptions stream;
  std::chrono::seconds handshake_timeout{10};
  // Handlers run a handshake of their own and enter their ServingGate once it is over;
  // otherwise a connection is served as soon as it is accepted (and past TLS).
  bool handlers_negotiate = false;
  // Run on this loop, for at most refusal_timeout, for a client refused at
  // max_handshakes (default: the connection is only closed).
  ConnectionRefuser refuse;
  // Where failed connections are reported when not `once` (default: stderr).
  std::function<void(const Error&)> report;
};

class ServerLoop {
 public:
  // How long a refused client is given to read why (a stalled one is dropped then),
  // and how many are told at once (more are only closed): a bound on what refusing
  // costs, a descriptor and a few hundred bytes each.
  static constexpr std::chrono::seconds refusal_timeout{3};
  static constexpr std::size_t max_refusing = 256;
  // Refusals and failed handshakes: one report each per interval, then a count.
  static constexpr std::chrono::seconds report_interval{10};

  // Connections are served on the acceptor's loop.
  ServerLoop(Acceptor acceptor, ConnectionHandler handler, ServerLoopOptions options);
  // Connections go to the worker serving the fewest at the time (at least one worker).
  ServerLoop(Acceptor acceptor, std::vector<ServerWorker> workers, ServerLoopOptions options);

  awaitable<Status> run();
  void stop();

  // Connections in their handshake or being served (not those being refused).
  std::size_t active() const { return handshaking_ + serving_; }
  std::size_t served() const { return served_; }

 private:
  awaitable<Status> serve_one(Socket socket);
  // On the worker's loop: the TLS handshake if any, then the handler.
  awaitable<Status> serve_on_worker(Socket socket, const ConnectionHandler& handler, ServingGate& gate);
  awaitable<Status> refuse_one(Socket socket, std::string reason);
  // A gate's claim, from the worker's loop: the counting is done on this one.
  awaitable<Status> enter_serving(executor from, std::string peer);
  awaitable<Status> claim_serving_slot(std::string peer);
  std::size_t pick_worker() const;
  void report_limited(ReportLimiter& limiter, Error e, const std::string& peer);
  void schedule_summaries();
  // The summaries that are due, or `all` of them (at the end of run()).
  void report_summaries(bool all);
  // Errors accept() can return while the process or system is short of descriptors or
  // memory: worth waiting out, not ending the server for.
  static bool is_transient_accept_error(const asio::error_code& ec);

  Acceptor acceptor_;
  std::vector<ServerWorker> workers_;
  std::vector<std::size_t> worker_load_;  // connections each worker is serving
  ServerLoopOptions options_;
  std::size_t handshaking_ = 0;
  std::size_t serving_ = 0;
  std::size_t served_ = 0;
  std::set<int> refusing_;  // the sockets of refusals in progress, for stop()
  std::list<asio::steady_timer*> slot_waiters_;  // claims waiting for a serving slot
  ReportLimiter refusals_{"connections refused", report_interval};
  ReportLimiter failed_handshakes_{"failed handshakes", report_interval};
  asio::steady_timer summary_timer_;
  bool summary_scheduled_ = false;
  bool stopping_ = false;
  bool accept_starved_ = false;  // said once per spell of transient accept errors
};

}  // namespace sluice
