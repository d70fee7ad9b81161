// ExportClient: the connections one Source or Destination holds to one NBD export.
//
// Opening connects, negotiates, lets the caller judge what the server said (a
// destination refuses a read-only or too small export here, before any data moves),
// and then opens the further connections `ClientOptions::connections` asks for, but
// only when the server advertises CAN_MULTI_CONN: without it, writes on one connection
// need not be visible to a FLUSH on another. Otherwise it says once, through the
// notice callback, that it uses one connection.
//
// Requests go to the connection with the fewest in flight.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/error.hpp"
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
  ~ExportClient();

  const NegotiatedExport& facts() const { return connections_.front()->facts(); }
  const std::string& display() const { return display_; }
  std::span<const std::unique_ptr<Connection>> connections() const { return connections_; }

  // The connection with the fewest requests in flight.
  Connection& pick();

  // FLUSH on every connection at once (the caller has seen every write complete);
  // nothing when the server has no write cache to flush (no SEND_FLUSH).
  awaitable<Status> flush();
  // DISC and close on every connection, then waits for their readers. Idempotent.
  awaitable<void> disconnect();
  void abort();

  // Connections, socket writes, TLS records and TCP segments, summed over connections.
  void add_stats(TransferStats& stats) const;

 private:
  explicit ExportClient(std::string display) : display_(std::move(display)) {}
  awaitable<Status> add_connections(const Target& target, const ClientOptions& options);

  std::string display_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::size_t next_ = 0;
};

}  // namespace sluice::nbd
