#include "engine/net/server_loop.hpp"

#include <sys/socket.h>

#include <asio/steady_timer.hpp>
#include <cerrno>
#include <cstdio>

#include "engine/net/deadline.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/printable.hpp"

namespace sluice {

namespace {

Error busy(std::string message) {
  return Error{std::make_error_code(std::errc::device_or_resource_busy), std::move(message)};
}

}  // namespace

ServerLoop::ServerLoop(Acceptor acceptor, ConnectionHandler handler, ServerLoopOptions options)
    : ServerLoop(std::move(acceptor), std::vector<ServerWorker>{}, std::move(options)) {
  workers_.push_back(ServerWorker{acceptor_.get_executor(), std::move(handler)});
  worker_load_.assign(1, 0);
}

ServerLoop::ServerLoop(Acceptor acceptor, std::vector<ServerWorker> workers, ServerLoopOptions options)
    : acceptor_(std::move(acceptor)),
      workers_(std::move(workers)),
      worker_load_(workers_.size(), 0),
      options_(std::move(options)),
      summary_timer_(acceptor_.get_executor()) {
  if (!options_.report)
    options_.report = [](const Error& e) { std::fprintf(stderr, "sluice: %s\n", printable(e.message).c_str()); };
}

void ServerLoop::stop() {
  stopping_ = true;
  for (asio::steady_timer* waiter : slot_waiters_) waiter->cancel();
  for (int fd : refusing_) ::shutdown(fd, SHUT_RDWR);
  asio::error_code ignored;
  acceptor_.cancel(ignored);
  acceptor_.close(ignored);
}

awaitable<Status> ServerLoop::run() {
  auto ex = co_await asio::this_coro::executor;
  // Connection failures are reported, not fatal, unless `once`.
  TaskGroup connections(ex);
  Status first;
  while (!stopping_) {
    Socket socket(ex);
    auto [ec] = co_await acceptor_.async_accept(socket, use_nothrow);
    if (ec) {
      if (stopping_) break;
      if (ec == asio::error::connection_aborted) continue;
      if (is_transient_accept_error(ec)) {
        // Out of descriptors or memory for now: the connections being served will give
        // some back. The waiting client stays queued; stopping for good would leave
        // every later client hanging on a listener nobody accepts from.
        if (!accept_starved_)
          options_.report(Error{ec, "cannot accept a connection for now: " + ec.message() +
                                        " (raise `ulimit -n` or lower --max-connections); retrying"});
        accept_starved_ = true;
        asio::steady_timer pause(ex, std::chrono::milliseconds(100));
        co_await pause.async_wait(use_nothrow);
        continue;
      }
      connections.fail(Error{ec, "accept failed: " + ec.message()});
      break;
    }
    accept_starved_ = false;
    if (handshaking_ >= options_.max_handshakes) {
      std::string reason = "the server is busy: " + std::to_string(handshaking_) +
                           " clients are already in their handshake (--max-handshakes); try again later";
      const std::string peer = describe_peer(socket);
      report_limited(refusals_, busy("refused a connection from " + peer + ": " + reason), peer);
      if (options_.refuse && refusing_.size() < max_refusing)
        connections.spawn(refuse_one(std::move(socket), std::move(reason)));
      continue;  // closing the socket tells the client
    }
    if (options_.once) {
      stop();
      first = co_await serve_one(std::move(socket));
      break;
    }
    connections.spawn(serve_one(std::move(socket)));
  }
  Status rest = co_await connections.join();
  summary_timer_.cancel();
  report_summaries(true);
  if (!first) co_return first;
  if (!rest && !rest.error().is_cancellation()) co_return rest;
  co_return Status{};
}

awaitable<Status> ServerLoop::refuse_one(Socket socket, std::string reason) {
  const int fd = socket.native_handle();
  refusing_.insert(fd);
  SocketStream stream(std::move(socket), options_.stream);
  {
    Deadline deadline(co_await asio::this_coro::executor, refusal_timeout, fd, nullptr);
    if (!stopping_) co_await options_.refuse(stream, reason);
  }
  refusing_.erase(fd);
  co_await stream.close();
  co_return Status{};  // reported when refused
}

awaitable<Status> ServerLoop::enter_serving(executor from, std::string peer) {
  if (from == acceptor_.get_executor()) co_return co_await claim_serving_slot(std::move(peer));
  co_return co_await asio::co_spawn(acceptor_.get_executor(), claim_serving_slot(std::move(peer)),
                                    asio::use_awaitable);
}

awaitable<Status> ServerLoop::claim_serving_slot(std::string peer) {
  // A connection that has just ended can still hold its slot: the sender saw the close
  // (a Chunked receiver closes once the image is flushed) and connected again, and its
  // accept completed before the handler that closed resumed to give the slot back. A
  // sender of images one after another (xapi) must not be refused for that instant, so
  // a full server looks again for a moment before it refuses. Each claim waits on its
  // own, so refusals never queue behind each other. A connection accepted before a
  // stop is still served (the stop winds it down as it does the others).
  if (serving_ >= options_.max_connections && !stopping_) {
    asio::steady_timer wait(acceptor_.get_executor());
    wait.expires_after(std::chrono::milliseconds(250));
    auto listed = slot_waiters_.insert(slot_waiters_.end(), &wait);
    while (serving_ >= options_.max_connections && !stopping_) {
      auto [ec] = co_await wait.async_wait(use_nothrow);
      if (!ec) break;  // the moment is over; a slot given back cancels the wait instead
    }
    slot_waiters_.erase(listed);
  }
  if (serving_ >= options_.max_connections) {
    std::string reason = "the server is busy: it already serves " + std::to_string(serving_) +
                         " clients (--max-connections); try again later";
    report_limited(refusals_, busy("refused a connection from " + peer + ": " + reason), peer);
    co_return tl::unexpected(busy(std::move(reason)));
  }
  --handshaking_;
  ++serving_;
  co_return Status{};
}

void ServerLoop::report_limited(ReportLimiter& limiter, Error e, const std::string& peer) {
  // Reports alike but for the peer are of one kind.
  std::string kind = e.message;
  for (auto at = kind.find(peer); !peer.empty() && at != std::string::npos; at = kind.find(peer, at))
    kind.erase(at, peer.size());
  const auto now = ReportLimiter::clock::now();
  for (const Error& summary : limiter.summaries(now, false)) options_.report(summary);
  if (auto line = limiter.admit(e, kind, now)) options_.report(*line);
  schedule_summaries();
}

void ServerLoop::schedule_summaries() {
  if (summary_scheduled_) return;
  auto due = refusals_.summary_due();
  if (auto other = failed_handshakes_.summary_due(); other && (!due || *other < *due)) due = other;
  if (!due) return;
  summary_scheduled_ = true;
  summary_timer_.expires_at(*due);
  // The timer is cancelled before the loop is destroyed (run()'s end); a cancelled wait
  // touches nothing.
  summary_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    summary_scheduled_ = false;
    report_summaries(false);
  });
}

void ServerLoop::report_summaries(bool all) {
  const auto now = ReportLimiter::clock::now();
  for (ReportLimiter* limiter : {&refusals_, &failed_handshakes_})
    for (const Error& summary : limiter->summaries(now, all)) options_.report(summary);
  if (!all) schedule_summaries();
}

bool ServerLoop::is_transient_accept_error(const asio::error_code& ec) {
  switch (errno_of(ec)) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM: return true;
    default: return false;
  }
}

std::size_t ServerLoop::pick_worker() const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < workers_.size(); ++i)
    if (worker_load_[i] < worker_load_[best]) best = i;
  return best;
}

awaitable<Status> ServerLoop::serve_one(Socket socket) {
  ++handshaking_;
  ++served_;
  std::string peer = describe_peer(socket);
  const std::size_t index = pick_worker();
  const ServerWorker& worker = workers_[index];
  ++worker_load_[index];
  ServingGate gate([this, ex = worker.ex, peer] { return enter_serving(ex, peer); });
  Status status;
  if (worker.ex == acceptor_.get_executor()) {
    status = co_await serve_on_worker(std::move(socket), worker.handler, gate);
  } else {
    // A socket belongs to one loop: hand the descriptor over to the worker's.
    asio::error_code ec;
    const auto protocol = socket.local_endpoint(ec).protocol();
    const int fd = ec ? -1 : socket.release(ec);
    if (ec) {
      status = fail(ec, "handing the connection to a worker: " + ec.message());
    } else {
      Socket moved(worker.ex, protocol, fd);
      status = co_await asio::co_spawn(worker.ex, serve_on_worker(std::move(moved), worker.handler, gate),
                                       asio::use_awaitable);
    }
  }
  --worker_load_[index];
  if (gate.entered()) {
    --serving_;
    for (asio::steady_timer* waiter : slot_waiters_) waiter->cancel();
  } else {
    --handshaking_;
  }
  if (!status && !options_.once) {
    Error e = status.error();
    if (e.message.find(peer) == std::string::npos) e.message = peer + ": " + e.message;
    // A client that never got past its handshake may be one of many bad ones.
    if (gate.entered())
      options_.report(e);
    else
      report_limited(failed_handshakes_, e, peer);
    co_return Status{};  // reported; the server carries on
  }
  co_return status;
}

awaitable<Status> ServerLoop::serve_on_worker(Socket socket, const ConnectionHandler& handler, ServingGate& gate) {
  std::unique_ptr<Stream> stream;
  if (options_.tls) {
    // A client stalled in the handshake is cut off; the handshake's own failure (the
    // socket shut down) would blame the client for closing.
    Deadline deadline(co_await asio::this_coro::executor, options_.handshake_timeout, socket.native_handle(),
                      nullptr);
    auto tls = co_await TlsStream::handshake(options_.tls, std::move(socket), options_.stream);
    deadline.disarm();
    if (!tls && deadline.fired())
      co_return fail(std::errc::timed_out, "the TLS handshake did not finish within " +
                                               std::to_string(options_.handshake_timeout.count()) +
                                               " seconds (--handshake-timeout); the client was dropped");
    if (!tls) {
      Error e = tls.error();
      // The place that knows which TLS this is: a tls:// listener's.
      if (e.message.ends_with(TlsStream::client_not_tls))
        e.message.insert(e.message.size() - 1, ": it must send to tls:// or https://");
      co_return tl::unexpected(std::move(e));
    }
    stream = std::move(*tls);
  } else {
    stream = std::make_unique<SocketStream>(std::move(socket), options_.stream);
  }
  if (!options_.handlers_negotiate) {
    if (Status in = co_await gate.enter(); !in) {
      co_await stream->close();  // the client's only word in protocols without a reply
      co_return Status{};        // reported by the claim
    }
  }
  co_return co_await handler(std::move(stream), gate);
}

}  // namespace sluice
