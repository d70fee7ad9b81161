#include "engine/net/server_loop.hpp"

#include <asio/steady_timer.hpp>
#include <cerrno>
#include <cstdio>

#include "engine/net/deadline.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/printable.hpp"

namespace sluice {

ServerLoop::ServerLoop(Acceptor acceptor, ConnectionHandler handler, ServerLoopOptions options)
    : ServerLoop(std::move(acceptor), std::vector<ServerWorker>{}, std::move(options)) {
  workers_.push_back(ServerWorker{acceptor_.get_executor(), std::move(handler)});
  worker_load_.assign(1, 0);
}

ServerLoop::ServerLoop(Acceptor acceptor, std::vector<ServerWorker> workers, ServerLoopOptions options)
    : acceptor_(std::move(acceptor)),
      slot_freed_(acceptor_.get_executor()),
      workers_(std::move(workers)),
      worker_load_(workers_.size(), 0),
      options_(std::move(options)) {
  if (!options_.report)
    options_.report = [](const Error& e) { std::fprintf(stderr, "sluice: %s\n", printable(e.message).c_str()); };
}

void ServerLoop::stop() {
  stopping_ = true;
  slot_freed_.cancel();
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
    if (active_ >= options_.max_connections) co_await wait_for_a_slot();
    if (active_ >= options_.max_connections) {
      options_.report(Error{std::make_error_code(std::errc::too_many_files_open),
                            "refused a connection from " + describe_peer(socket) + ": already serving " +
                                std::to_string(active_) + " (--max-connections)"});
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
  if (!first) co_return first;
  if (!rest && !rest.error().is_cancellation()) co_return rest;
  co_return Status{};
}

awaitable<void> ServerLoop::wait_for_a_slot() {
  // A connection that has just ended can still hold its slot: the sender saw the close
  // (a Chunked receiver closes once the image is flushed) and connected again, and its
  // accept completed before the handler that closed resumed to give the slot back. A
  // sender of images one after another (xapi) must not be refused for that instant, so
  // a full server looks again for a moment before it refuses.
  // serve_one() and stop() cancel the wait; a connection ends on this loop, so it
  // cannot slip in between the caller's count and the wait.
  slot_freed_.expires_after(std::chrono::milliseconds(250));
  co_await slot_freed_.async_wait(use_nothrow);
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
  ++active_;
  ++served_;
  std::string peer = describe_peer(socket);
  const std::size_t index = pick_worker();
  const ServerWorker& worker = workers_[index];
  ++worker_load_[index];
  Status status;
  if (worker.ex == acceptor_.get_executor()) {
    status = co_await serve_on_worker(std::move(socket), worker.handler);
  } else {
    // A socket belongs to one loop: hand the descriptor over to the worker's.
    asio::error_code ec;
    const auto protocol = socket.local_endpoint(ec).protocol();
    const int fd = ec ? -1 : socket.release(ec);
    if (ec) {
      status = fail(ec, "handing the connection to a worker: " + ec.message());
    } else {
      Socket moved(worker.ex, protocol, fd);
      status = co_await asio::co_spawn(worker.ex, serve_on_worker(std::move(moved), worker.handler),
                                       asio::use_awaitable);
    }
  }
  --worker_load_[index];
  --active_;
  slot_freed_.cancel();
  if (!status && !options_.once) {
    Error e = status.error();
    if (e.message.find(peer) == std::string::npos) e.message = peer + ": " + e.message;
    options_.report(e);
    co_return Status{};  // reported; the server carries on
  }
  co_return status;
}

awaitable<Status> ServerLoop::serve_on_worker(Socket socket, const ConnectionHandler& handler) {
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
    if (!tls) co_return tl::unexpected(tls.error());
    stream = std::move(*tls);
  } else {
    stream = std::make_unique<SocketStream>(std::move(socket), options_.stream);
  }
  co_return co_await handler(std::move(stream));
}

}  // namespace sluice
