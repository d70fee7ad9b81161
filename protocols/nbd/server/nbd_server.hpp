// NbdServer: serves NBD connections, each from handshake to close, for a ServerLoop.
//
// It owns the policy shared by all connections (ServerConfig) and knows the live
// ones, so that stop() can wind them down: connections still negotiating are closed,
// connections in transmission finish the requests in flight (later ones are answered
// ESHUTDOWN) and close. A connection that wrote to its export flushes it before
// closing, so data a client wrote is on stable storage once its session is over.
#pragma once

#include <cstddef>
#include <list>
#include <memory>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/serving_gate.hpp"
#include "engine/net/stream.hpp"
#include "protocols/nbd/server/exports.hpp"

namespace sluice::nbd {

class Transmission;

class NbdServer {
 public:
  explicit NbdServer(ServerConfig config);
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  // One connection, from the greeting to the close (a ServerLoop ConnectionHandler):
  // `gate` is entered when the client chooses an export.
  awaitable<Status> serve(std::unique_ptr<Stream> stream, ServingGate& gate);

  void stop();

  const ServerConfig& config() const { return config_; }
  std::size_t connections() const { return live_.size(); }

 private:
  struct Connection {
    int fd = -1;  // the socket, for shutting it down from outside; -1 if not a socket
    Transmission* transmission = nullptr;
  };

  ServerConfig config_;
  std::list<Connection*> live_;
  bool stopping_ = false;
};

}  // namespace sluice::nbd
