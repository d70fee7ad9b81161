#include "protocols/nbd/client/export_client.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <thread>

#include "engine/net/address.hpp"
#include "engine/net/deadline.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/run_on.hpp"
#include "engine/task_group.hpp"
#include "protocols/nbd/client/handshake.hpp"

namespace sluice::nbd {

namespace {

awaitable<Result<std::unique_ptr<Connection>>> handshake_on(std::unique_ptr<Stream> stream, int fd,
                                                            const ClientOptions& options,
                                                            const std::string& display) {
  auto ex = co_await asio::this_coro::executor;
  const std::string peer = stream->peer();
  Deadline deadline(ex, options.opening().seconds, fd, stream.get(), options.cancellation);
  auto negotiated = co_await negotiate(std::move(stream), options);
  deadline.disarm();
  if (!negotiated) {
    if (deadline.cancelled()) co_return tl::unexpected(cancelled_error());
    if (deadline.fired())
      co_return fail(std::errc::timed_out, display + ": the NBD handshake with " + peer + " did not finish within " +
                                               options.opening().describe());
    co_return fail(negotiated.error().code, display + ": " + negotiated.error().message);
  }
  auto connection = std::make_unique<Connection>(ex, std::move(negotiated->stream), std::move(negotiated->facts),
                                                 options.timeout);
  connection->start();
  co_return connection;
}

awaitable<Result<std::unique_ptr<Connection>>> connect_one(const Target& target, const ClientOptions& options) {
  auto socket = co_await connect_to(target.address, options.opening().seconds, options.cancellation);
  if (!socket) co_return fail(socket.error().code, target.display + ": " + socket.error().message);
  const int fd = socket->native_handle();
  auto stream = std::make_unique<SocketStream>(std::move(*socket), options.stream);
  co_return co_await handshake_on(std::move(stream), fd, options, target.display);
}

// A connection is destroyed on the loop it belongs to (its socket, timer and reader
// are that loop's), while that loop may still be running.
awaitable<void> disconnect_and_destroy(std::unique_ptr<Connection> connection) {
  co_await connection->disconnect();
  connection.reset();
}

// A loop per connection, as many as there are CPUs: each connection's send copies (and
// over TLS its record sealing) then run on a core of their own: faster than one loop for
// plain TCP and TLS alike, even on two vCPUs shared with the server
// (docs/benchmarks.md, section "A loop per NBD connection").
unsigned automatic_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace

// Counts a request against its slot for as long as its issuer waits, including when the
// issuer's frame is destroyed while it waits.
class ExportClient::Issued {
 public:
  explicit Issued(Slot& slot) : slot_(slot) { ++slot_.in_flight; }
  ~Issued() { --slot_.in_flight; }
  Issued(const Issued&) = delete;
  Issued& operator=(const Issued&) = delete;

 private:
  Slot& slot_;
};

ExportClient::~ExportClient() {
  for ([[maybe_unused]] const Slot& slot : slots_)
    assert(slot.in_flight == 0 && "ExportClient destroyed with requests in flight");
  // The loops have nothing left to run once every connection is disconnected; their
  // threads must be gone before the connections bound to them are destroyed.
  if (loops_) loops_->stop();
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
  const executor home = co_await asio::this_coro::executor;
  client->slots_.push_back(Slot{std::move(*first), home});
  if (check) {
    if (Status ok = check(client->facts()); !ok) {
      co_await client->disconnect();
      co_return fail(ok.error().code, target.display + ": " + ok.error().message);
    }
  }
  if (Status more = co_await client->add_connections(target, options); !more) {
    co_await client->disconnect();
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
  const unsigned loops = std::min(count, options.threads != 0 ? options.threads : automatic_threads());
  if (loops > 1) {
    loops_ = std::make_unique<LoopThreads>(loops - 1);
    loops_->start();
  }
  const executor home = co_await asio::this_coro::executor;
  while (slots_.size() < count) {
    // A connection is made on the loop it will live on: its socket belongs to that
    // loop's io_uring.
    const executor loop = loop_for(slots_.size(), home);
    auto more = co_await run_on(loop, connect_one(target, options));
    if (!more && more.error().is_cancellation()) co_return tl::unexpected(more.error());
    if (!more) {
      // The copy is still correct on fewer connections; say so and go on.
      if (options.notice && explicit_count)
        options.notice(display_ + ": opened " + std::to_string(slots_.size()) + " of " + wanted +
                       " connections: " + more.error().message);
      co_return Status{};
    }
    const NegotiatedExport& extra = (*more)->facts();
    if (extra.size != facts().size || extra.flags != facts().flags) {
      const std::string message =
          display_ + ": the server described the export differently on a second connection (size " +
          std::to_string(extra.size) + " vs " + std::to_string(facts().size) + ")";
      co_await run_on(loop, disconnect_and_destroy(std::move(*more)));
      co_return fail(std::errc::protocol_error, message);
    }
    slots_.push_back(Slot{std::move(*more), loop, loop != home});
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
  const executor home = co_await asio::this_coro::executor;
  client->slots_.push_back(Slot{std::move(*connection), home});
  if (check) {
    if (Status ok = check(client->facts()); !ok) {
      co_await client->disconnect();
      co_return fail(ok.error().code, client->display_ + ": " + ok.error().message);
    }
  }
  if (options.connections > 1 && options.notice)
    options.notice(client->display_ + ": one connection (the stream was handed over already connected)");
  co_return client;
}

executor ExportClient::loop_for(std::size_t connection_index, executor home) const {
  if (!loops_) return home;
  const std::size_t loop = connection_index % loop_count();
  return loop == 0 ? home : loops_->at(loop - 1);
}

ExportClient::Slot& ExportClient::pick(const executor& issuer) {
  if (in_lanes_) {
    // Only the issuer's loop's own connections, least busy first; ties go to the first
    // (a busier one is passed over anyway). A lane on a loop without a connection is a
    // caller's bug: it would touch another loop's sockets.
    Slot* best = nullptr;
    for (Slot& slot : slots_)
      if (slot.loop == issuer && (best == nullptr || slot.in_flight < best->in_flight)) best = &slot;
    assert(best != nullptr && "a lane issued a request from a loop with no connection");
    return *best;
  }
  // Least busy first; ties rotate so idle connections all get work.
  Slot* best = nullptr;
  const std::size_t n = slots_.size();
  for (std::size_t i = 0; i < n; ++i) {
    Slot* slot = &slots_[(next_ + i) % n];
    if (best == nullptr || slot->in_flight < best->in_flight) best = slot;
  }
  next_ = (next_ + 1) % n;
  return *best;
}

std::vector<executor> ExportClient::loops() const {
  std::vector<executor> loops;
  for (const Slot& slot : slots_)
    if (std::find(loops.begin(), loops.end(), slot.loop) == loops.end()) loops.push_back(slot.loop);
  return loops;
}

bool ExportClient::splices() const {
  for (const Slot& slot : slots_)
    if (!slot.connection->splices()) return false;
  return true;
}

// Every request but a WRITE from a pool buffer: on the least busy connection, run on
// that connection's loop, the caller resumed on its own.
template <class T, class Request>
awaitable<T> ExportClient::issue(Request request) {
  Slot& slot = pick(co_await asio::this_coro::executor);
  Issued issued(slot);
  co_return co_await run_on(slot.loop, request(*slot.connection));
}

awaitable<Status> ExportClient::read(std::uint64_t offset, std::span<std::byte> into) {
  return issue<Status>([=](Connection& c) { return c.read(offset, into); });
}

awaitable<Status> ExportClient::write(std::uint64_t offset, std::span<const std::byte> data) {
  return issue<Status>([=](Connection& c) { return c.write(offset, data); });
}

awaitable<Status> ExportClient::write_file(std::uint64_t offset, FileSlice slice) {
  return issue<Status>([=](Connection& c) { return c.write_file(offset, slice, 0); });
}

awaitable<Status> ExportClient::write_zeroes(std::uint64_t offset, std::uint32_t length, std::uint16_t flags) {
  return issue<Status>([=](Connection& c) { return c.write_zeroes(offset, length, flags); });
}

awaitable<Result<std::vector<Extent>>> ExportClient::block_status(std::uint64_t offset, std::uint32_t length) {
  return issue<Result<std::vector<Extent>>>([=](Connection& c) { return c.block_status(offset, length); });
}

awaitable<Status> ExportClient::write(std::uint64_t offset, Buffer data) {
  const executor here = co_await asio::this_coro::executor;
  Slot& slot = pick(here);
  Issued issued(slot);
  if (slot.loop == here) co_return co_await slot.connection->write(offset, std::move(data));
  co_return co_await write_lent(slot, offset, std::move(data));
}

// The buffer belongs to a pool on this loop and must go back to it here (its count is
// a plain integer). The connection's loop says when the bytes are in the kernel and
// posts the release home, so the pool refills the block while the server works.
awaitable<Status> ExportClient::write_lent(Slot& slot, std::uint64_t offset, Buffer data) {
  struct Loan {
    Buffer buffer;
    std::atomic<bool> posted{false};  // set on the connection's loop
    bool returned = false;            // set here
  };
  const executor home = co_await asio::this_coro::executor;
  Loan loan{std::move(data)};
  const auto header_room = loan.buffer.headroom() >= request_header_size ? loan.buffer.prefix(request_header_size)
                                                                          : std::span<std::byte>{};
  auto sent = [&loan, home] {
    loan.posted.store(true, std::memory_order_release);
    asio::post(home, [&loan] {
      loan.buffer = Buffer{};
      loan.returned = true;
    });
  };
  Status status = co_await asio::co_spawn(
      slot.loop, slot.connection->write_lent(offset, loan.buffer.bytes(), header_room, std::move(sent)),
      asio::use_awaitable);
  // The release may still be queued behind this completion; it refers to `loan`.
  while (loan.posted.load(std::memory_order_acquire) && !loan.returned) co_await asio::post(home, asio::use_awaitable);
  co_return status;
}

awaitable<Status> ExportClient::flush() {
  if (!facts().can_flush()) co_return Status{};
  if (slots_.size() == 1) co_return co_await slots_.front().connection->flush();
  TaskGroup flushes(co_await asio::this_coro::executor);
  for (Slot& slot : slots_) flushes.spawn(run_on(slot.loop, slot.connection->flush()));
  co_return co_await flushes.join();
}

awaitable<void> ExportClient::disconnect() {
  for (Slot& slot : slots_) {
    co_await run_on(slot.loop, slot.connection->disconnect());
    // Its loop has nothing left to do for it (the reader has ended), so from here its
    // statistics can be read from this thread.
    slot.final_stats = slot.connection->stats();
  }
}

// At once on the loop it is called from (a failing lane's, or the caller's), queued
// for the others.
void ExportClient::abort() {
  for (Slot& slot : slots_)
    asio::dispatch(slot.loop, [connection = slot.connection.get()] { connection->abort(); });
}

void ExportClient::add_stats(TransferStats& stats) const {
  std::uint64_t writes = 0, records = 0, segments = 0;
  std::string cipher;
  bool tls = false;
  for (const Slot& slot : slots_) {
    // A connection on another loop is read only once it is disconnected; before that
    // (a failed transfer, whose statistics nobody reports) its loop may be writing them.
    if (slot.remote && !slot.final_stats) continue;
    StreamStats s = slot.remote ? *slot.final_stats : slot.connection->stats();
    writes += s.socket_writes;
    records += s.tls_records;
    segments += s.tcp_segments;
    tls = tls || slot.connection->facts().tls;
    if (cipher.empty()) cipher = s.tls_cipher;
  }
  stats.connections = slots_.size();
  // Connections take the loops in turn, the caller's first.
  stats.loops = std::min(loop_count(), slots_.size());
  stats.socket_writes = writes;
  if (tls) stats.tls_records = records;
  if (tls && !cipher.empty()) stats.tls_cipher = cipher;
  if (segments > 0) stats.tcp_segments = segments;
}

}  // namespace sluice::nbd
