// Everything that says how to open an endpoint, beyond its URI.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/cancellation.hpp"
#include "engine/net/opening_limit.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_options.hpp"
#include "storage/file_options.hpp"

namespace sluice {

// How a local source file is read: as the VHD its footer says it is (auto), or
// forced either way, as `qemu-img -f` forces it.
enum class SourceFormat { automatic, raw, vhd };

struct EndpointOptions {
  FileOptions file;
  SourceFormat source_format = SourceFormat::automatic;
  // Directories where a differencing VHD's parents are looked for, after the child's own.
  std::vector<std::string> vhd_path;

  // Network endpoints.
  std::string protocol;  // tcp:// tls:// unix://: "chunked" (default), "raw" or "nbd"
  TlsOptions tls;        // tls://, https://, nbds:// (URI parameters may add to it)
  StreamOptions stream;  // TCP_NODELAY and batching
  unsigned connections = 0;         // NBD multi-conn when the server allows it (0: 2 if so)
  unsigned threads = 0;             // event loops for NBD connections (0: one each, up to the CPUs)
  std::chrono::seconds timeout{0};  // a peer that stops answering (0: no limit)
  // Connecting and the handshakes (0: bounded by `timeout` alone; see OpeningLimit).
  std::chrono::seconds connect_timeout{30};
  OpeningLimit opening() const { return opening_limit(timeout, connect_timeout); }
  // Stops the waits on a peer while the endpoints open (Transfer sets it to its own).
  Cancellation* cancellation = nullptr;

  // Notes for the user that are not errors ("the server does not allow multi-conn; one
  // connection"). The library never prints; unset, notes are dropped.
  std::function<void(const std::string&)> notice;
};

}  // namespace sluice
