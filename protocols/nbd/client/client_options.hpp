// What an NBD client asks of a server, beyond where it is (Target).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "engine/cancellation.hpp"
#include "engine/net/opening_limit.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"

namespace sluice::nbd {

// Where the client tells its user something worth knowing that is not an error ("the
// server does not allow multi-conn; one connection"). The protocol code never prints:
// the application decides where notes go.
using NoticeCallback = std::function<void(const std::string&)>;

struct ClientOptions {
  std::string export_name;
  // STARTTLS first, and refuse a server without it. Needs `tls_context` (client role).
  bool tls = false;
  std::shared_ptr<TlsContext> tls_context;
  std::string tls_hostname;  // verified against the certificate; empty: chain only
  // The send buffer fitted to the path: on loopback, WRITEs to nbdkit went faster than
  // with the kernel's autotuned 4 MiB (docs/benchmarks.md, section "The send buffer").
  StreamOptions stream{.fit_send_buffer = true};

  // Ask for structured replies (off: behave like a client that predates them).
  bool structured_replies = true;
  // Ask for base:allocation (sources want the map; destinations do not).
  bool allocation_map = false;

  // Connections to open when the server allows multi-conn; 0 picks for the user:
  // `automatic_connections` where the server advertises CAN_MULTI_CONN and the first
  // connection's handshake measured a round trip under `multi_conn_round_trip_limit`,
  // else one, without a notice. Extra connections spread CPU work (over TLS to nbdkit
  // the server decrypts each connection on its own thread), which is the limit on a
  // short link. On a long one
  // the window is, which the copy's depth covers on one connection, and each extra
  // connection's handshake costs its round trips before it carries anything
  // (docs/benchmarks.md, section "Two NBD connections").
  unsigned connections = 0;
  static constexpr unsigned automatic_connections = 2;
  static constexpr std::chrono::microseconds multi_conn_round_trip_limit{500};
  // Event loops (threads) the connections run on, the caller's loop included; extra
  // loops each take a share of the connections beyond the first. 0 picks for the
  // user: a loop per connection, up to the number of CPUs.
  unsigned threads = 0;
  // A server with requests pending that sends nothing for this long fails the
  // connection; also bounds the handshake. Zero: no limit.
  std::chrono::seconds timeout{0};
  // Connecting and the handshake (0: bounded by `timeout` alone; see OpeningLimit).
  std::chrono::seconds connect_timeout{30};
  OpeningLimit opening() const { return opening_limit(timeout, connect_timeout); }
  // Stops the connects and handshakes while the client opens; afterwards the copy
  // stops it through abort().
  Cancellation* cancellation = nullptr;
  NoticeCallback notice;
};

}  // namespace sluice::nbd
