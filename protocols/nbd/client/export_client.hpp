// ExportClient: the connections one Source or Destination holds to one NBD export.
//
// Opening connects, negotiates, lets the caller judge what the server said (a
// destination refuses a read-only or too small export here, before any data moves),
// and then opens the further connections `ClientOptions::connections` asks for, but
// only when the server advertises CAN_MULTI_CONN: without it, writes on one connection
// need not be visible to a FLUSH on another. Otherwise it says once, through the
// notice callback, that it uses one connection.
//
// Requests go to the connection with the fewest in flight. Connections beyond the
// first may each run on an event loop of their own (`ClientOptions::threads`), so
// that what each costs in CPU (TLS above all: sealing and opening every record) is
// spread over cores; the caller's loop keeps the first connection and everything
// else, and requests hop to a connection's loop and back (run_on). A WRITE's buffer
// never leaves the caller's loop: it is lent, and handed back by a post the moment
// its bytes are in the kernel, as a local connection releases it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/buffer.hpp"
#include "engine/error.hpp"
#include "engine/extent.hpp"
#include "engine/file_slice.hpp"
#include "engine/loop_threads.hpp"
#include "engine/net/stream.hpp"
#include "engine/stats.hpp"
#include "protocols/nbd/client/client_options.hpp"
#include "protocols/nbd/client/connection.hpp"
#include "protocols/nbd/client/target.hpp"

namespace sluice::nbd {

class ExportClient {
 public:
  // Judges the first connection's export before anything else happens.
  using Check = std::function<Status(const NegotiatedExport&)>;

  // `options.export_name`, `tls`, `tls_context` and `tls_hostname` are taken from
  // `target`.
  static awaitable<Result<std::unique_ptr<ExportClient>>> open(const Target& target, ClientOptions options,
                                                                Check check = {});
  // One connection over a stream that is already connected (an HTTP import that
  // switched to NBD). `display` names the endpoint in messages.
  static awaitable<Result<std::unique_ptr<ExportClient>>> open_on(std::unique_ptr<Stream> stream,
                                                                   std::string display, ClientOptions options,
                                                                   Check check = {});

  ExportClient(const ExportClient&) = delete;
  ExportClient& operator=(const ExportClient&) = delete;
  // disconnect() must have been awaited first.
  ~ExportClient();

  const NegotiatedExport& facts() const { return slots_.front().connection->facts(); }
  const std::string& display() const { return display_; }
  std::size_t connection_count() const { return slots_.size(); }
  // Event loops the connections run on, the caller's included.
  std::size_t loop_count() const { return 1 + (loops_ ? loops_->size() : 0); }
  // Whether every connection is a plain socket that can splice payload from files.
  bool splices() const;
  // The loops the connections run on, the caller's first.
  std::vector<executor> loops() const;

  // From now on each request goes to a connection on the loop it is issued from,
  // which must be one of loops(): a copy's lanes, each on one of those loops, then
  // drive their own connections, with no hop to another thread. Called on the
  // caller's loop before any lane issues a request.
  void serve_lanes() { in_lanes_ = true; }

  // Each request goes to the connection with the fewest in flight (in lanes: of
  // those on the issuer's loop), on whatever loop that connection runs, and completes
  // back on the issuer's loop; the arguments mean what they mean on Connection.
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte> into);
  awaitable<Status> write(std::uint64_t offset, Buffer data);
  awaitable<Status> write(std::uint64_t offset, std::span<const std::byte> data);
  awaitable<Status> write_file(std::uint64_t offset, FileSlice slice);
  awaitable<Status> write_zeroes(std::uint64_t offset, std::uint32_t length, std::uint16_t flags);
  awaitable<Result<std::vector<Extent>>> block_status(std::uint64_t offset, std::uint32_t length);

  // FLUSH on every connection at once (the caller has seen every write complete);
  // nothing when the server has no write cache to flush (no SEND_FLUSH).
  awaitable<Status> flush();
  // DISC and close on every connection, then waits for their readers. Idempotent.
  awaitable<void> disconnect();
  // Each connection is aborted on its own loop; callable from any of them.
  void abort();

  // Connections, socket writes, TLS records and TCP segments, summed over connections.
  // Connections on other loops update theirs as they go, so they count only once
  // disconnect() has returned (a transfer that succeeded).
  void add_stats(TransferStats& stats) const;

 private:
  // One connection and the loop it lives on. `in_flight` counts the requests issued
  // through the client, on the caller's loop (in lanes: on the connection's own), so
  // picking never reads another loop's state.
  struct Slot {
    std::unique_ptr<Connection> connection;
    executor loop;
    bool remote = false;
    std::size_t in_flight = 0;
    std::optional<StreamStats> final_stats = std::nullopt;  // read once disconnected
  };
  class Issued;

  explicit ExportClient(std::string display) : display_(std::move(display)) {}
  awaitable<Status> add_connections(const Target& target, const ClientOptions& options);
  // The loop the next connection should live on.
  executor loop_for(std::size_t connection_index, executor home) const;
  Slot& pick(const executor& issuer);
  // `request(connection)` makes the request's coroutine for the picked connection.
  template <class T, class Request>
  awaitable<T> issue(Request request);
  awaitable<Status> write_lent(Slot& slot, std::uint64_t offset, Buffer data);

  std::string display_;
  // Declared before the slots: connections are destroyed while their loops still exist.
  std::unique_ptr<LoopThreads> loops_;
  std::vector<Slot> slots_;
  std::size_t next_ = 0;  // the caller's tie-break turn; unused in lanes
  bool in_lanes_ = false;
};

}  // namespace sluice::nbd
