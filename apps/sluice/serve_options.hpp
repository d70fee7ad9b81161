// What `sluice serve` was asked to do.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/sluice/progress_reporter.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_options.hpp"

namespace sluice::cli {

struct ExportSpec {
  std::string name;
  std::string path;
};

struct ServeOptions {
  std::string listen;              // tcp://H:P, tls://H:P, unix:///PATH
  std::string protocol = "chunked";  // chunked, raw or nbd
  bool http = false;               // answer the xen-api import PUT first
  std::string output;              // chunked/raw: where the image goes
  std::optional<std::uint64_t> size;
  bool once = false;
  bool direct = false;
  bool zero_copy = true;  // splice payloads from plain sockets into the output

  TlsOptions tls;        // certificate, key, client CA, PSK file, ciphers
  std::string tls_mode;  // NBD: "require" or "off"; empty: require when credentials are given

  std::vector<ExportSpec> exports;  // NBD
  bool read_only = false;
  std::size_t max_connections = 16;
  // NBD: event-loop threads serving connections (0: one per CPU, at most 8).
  std::size_t threads = 0;
  std::chrono::seconds handshake_timeout{30};
  // Chunked and raw: a sender that sends nothing for this long is dropped (0: never).
  std::chrono::seconds idle_timeout{300};

  StreamOptions stream;
  std::optional<ProgressStyle> progress;
};

}  // namespace sluice::cli
