#include "protocols/nbd/client/export_client.hpp"

#include <cassert>

#include "engine/net/address.hpp"
#include "engine/net/deadline.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/task_group.hpp"
#include "protocols/nbd/client/handshake.hpp"

namespace sluice::nbd {

namespace {

awaitable<Result<std::unique_ptr<Connection>>> handshake_on(std::unique_ptr<Stream> stream, int fd,
                                                            const ClientOptions& options,
                                                            const std::string& display) {
  auto ex = co_await asio::this_coro::executor;
  const std::string peer = stream->peer();
  Deadline deadline(ex, options.timeout, fd, stream.get());
  auto negotiated = co_await negotiate(std::move(stream), options);
  deadline.disarm();
  if (!negotiated) {
    if (deadline.fired())
      co_return fail(std::errc::timed_out, display + ": the NBD handshake with " + peer + " did not finish within " +
                                               std::to_string(options.timeout.count()) + " seconds (--timeout)");
    co_return fail(negotiated.error().code, display + ": " + negotiated.error().message);
  }
  auto connection = std::make_unique<Connection>(ex, std::move(negotiated->stream), std::move(negotiated->facts),
                                                 options.timeout);
  connection->start();
  co_return connection;
}

awaitable<Result<std::unique_ptr<Connection>>> connect_one(const Target& target, const ClientOptions& options) {
  auto socket = co_await connect_to(target.address, options.timeout);
  if (!socket) co_return fail(socket.error().code, target.display + ": " + socket.error().message);
  const int fd = socket->native_handle();
  auto stream = std::make_unique<SocketStream>(std::move(*socket), options.stream);
  co_return co_await handshake_on(std::move(stream), fd, options, target.display);
}

// Closes connections opened so far when opening fails half way.
awaitable<void> discard(std::vector<std::unique_ptr<Connection>>& connections) {
  for (auto& c : connections) co_await c->disconnect();
  connections.clear();
}

}  // namespace

ExportClient::~ExportClient() {
  for ([[maybe_unused]] const auto& c : connections_)
    assert((c->failure() || c->in_flight() == 0) && "ExportClient destroyed with requests in flight");
}

awaitable<Result<std::unique_ptr<ExportClient>>> ExportClient::open(const Target& target, ClientOptions options,
                                                                    Check check) {
  options.export_name = target.export_name;
  options.tls = target.tls;
  options.tls_hostname = target.tls_hostname;
  if (target.tls && !options.tls_context) {
    auto context = TlsContext::create(TlsRole::client, target.tls_options);
    if (!context) co_return fail(context.error().code, target.display + ": " + context.error().message);
    options.tls_context = std::move(*context);
  }
  std::unique_ptr<ExportClient> client(new ExportClient(target.display));
  auto first = co_await connect_one(target, options);
  if (!first) co_return tl::unexpected(first.error());
  client->connections_.push_back(std::move(*first));
  if (check) {
    if (Status ok = check(client->facts()); !ok) {
      co_await discard(client->connections_);
      co_return fail(ok.error().code, target.display + ": " + ok.error().message);
    }
  }
  if (Status more = co_await client->add_connections(target, options); !more) {
    co_await discard(client->connections_);
    co_return tl::unexpected(more.error());
  }
  co_return client;
}

awaitable<Status> ExportClient::add_connections(const Target& target, const ClientOptions& options) {
  const bool explicit_count = options.connections != 0;
  // A Unix socket is on this machine however slow its handshake was (a busy one).
  const bool far = target.address.kind != NetAddress::Kind::unix_socket &&
                   facts().round_trip > ClientOptions::multi_conn_round_trip_limit;
  const unsigned count = explicit_count ? options.connections : far ? 1 : ClientOptions::automatic_connections;
  if (count <= 1) co_return Status{};
  const std::string wanted = std::to_string(count);
  if (!facts().can_multi_conn()) {
    // Asked for explicitly, a number the server cannot take is worth a notice; chosen
    // for the user, it is not.
    if (explicit_count && options.notice)
      options.notice(display_ + ": the server does not advertise multi-conn (CAN_MULTI_CONN); using 1 connection, not " +
                     wanted);
    co_return Status{};
  }
  while (connections_.size() < count) {
    auto more = co_await connect_one(target, options);
    if (!more) {
      // The copy is still correct on fewer connections; say so and go on.
      if (options.notice && explicit_count)
        options.notice(display_ + ": opened " + std::to_string(connections_.size()) + " of " + wanted +
                       " connections: " + more.error().message);
      co_return Status{};
    }
    const NegotiatedExport& extra = (*more)->facts();
    if (extra.size != facts().size || extra.flags != facts().flags) {
      co_await (*more)->disconnect();
      co_return fail(std::errc::protocol_error,
                     display_ + ": the server described the export differently on a second connection (size " +
                         std::to_string(extra.size) + " vs " + std::to_string(facts().size) + ")");
    }
    connections_.push_back(std::move(*more));
  }
  co_return Status{};
}

awaitable<Result<std::unique_ptr<ExportClient>>> ExportClient::open_on(std::unique_ptr<Stream> stream,
                                                                       std::string display, ClientOptions options,
                                                                       Check check) {
  int fd = -1;
  if (auto* plain = dynamic_cast<SocketStream*>(stream.get())) fd = plain->socket().native_handle();
  std::unique_ptr<ExportClient> client(new ExportClient(std::move(display)));
  auto connection = co_await handshake_on(std::move(stream), fd, options, client->display_);
  if (!connection) co_return tl::unexpected(connection.error());
  client->connections_.push_back(std::move(*connection));
  if (check) {
    if (Status ok = check(client->facts()); !ok) {
      co_await discard(client->connections_);
      co_return fail(ok.error().code, client->display_ + ": " + ok.error().message);
    }
  }
  if (options.connections > 1 && options.notice)
    options.notice(client->display_ + ": one connection (the stream was handed over already connected)");
  co_return client;
}

Connection& ExportClient::pick() {
  // Least busy first; ties rotate so idle connections all get work.
  Connection* best = nullptr;
  const std::size_t n = connections_.size();
  for (std::size_t i = 0; i < n; ++i) {
    Connection* c = connections_[(next_ + i) % n].get();
    if (best == nullptr || c->in_flight() < best->in_flight()) best = c;
  }
  next_ = (next_ + 1) % n;
  return *best;
}

awaitable<Status> ExportClient::flush() {
  if (!facts().can_flush()) co_return Status{};
  if (connections_.size() == 1) co_return co_await connections_.front()->flush();
  TaskGroup flushes(co_await asio::this_coro::executor);
  for (auto& c : connections_) flushes.spawn(c->flush());
  co_return co_await flushes.join();
}

awaitable<void> ExportClient::disconnect() {
  for (auto& c : connections_) co_await c->disconnect();
}

void ExportClient::abort() {
  for (auto& c : connections_) c->abort();
}

void ExportClient::add_stats(TransferStats& stats) const {
  std::uint64_t writes = 0, records = 0, segments = 0;
  bool tls = false;
  for (const auto& c : connections_) {
    StreamStats s = c->stats();
    writes += s.socket_writes;
    records += s.tls_records;
    segments += s.tcp_segments;
    tls = tls || c->facts().tls;
  }
  stats.connections = connections_.size();
  stats.socket_writes = writes;
  if (tls) stats.tls_records = records;
  if (segments > 0) stats.tcp_segments = segments;
}

}  // namespace sluice::nbd
