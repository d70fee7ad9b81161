// Everything that says what a Receiver serves and how: the options of `sluice serve`,
// one field per flag. Error messages about them name the flags (--output, --export).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/copy_options.hpp"
#include "engine/error.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_options.hpp"

namespace sluice {

// The Chunked and raw output that keeps nothing: a link test, iperf3's receiving end.
inline constexpr std::string_view null_output = "null:";

// An NBD export: a name clients ask for and the file or block device behind it.
struct ExportSpec {
  std::string name;
  std::string path;
};

// One Chunked or raw image received in full and flushed.
struct ReceivedImage {
  std::uint64_t connection = 0;  // as in ReceiveProgress
  std::string peer;
  std::string output;            // a path, or "null:" (discarded)
  std::uint64_t bytes_written = 0;
  std::uint64_t writes = 0;
  double seconds = 0;
  std::string tls_cipher;  // empty: plaintext
};

// Progress of one Chunked or raw sender. The last call for a connection has `finished`
// set, with `succeeded` saying how it ended.
struct ReceiveProgress {
  std::uint64_t connection = 0;  // numbers the senders from 1, in the order they came
  ProgressUpdate update;
  bool finished = false;
  bool succeeded = false;
};

struct ReceiverOptions {
  std::string listen;                // tcp://H:P (port 0: any), tls://H:P, unix:///PATH
  std::string protocol = "chunked";  // chunked, raw or nbd

  // Chunked and raw (xen-api's vhd-tool protocols).
  std::string output;  // where the image goes; "null:" keeps nothing (needs `size`)
  std::optional<std::uint64_t> size;  // default: the output's size
  bool http = false;                  // answer the xen-api import PUT first
  // With `http`, each request says how its body is framed (a `chunked` cookie or query
  // parameter, or a raw body), as xapi decides it; when `protocol_fixed` (serve's
  // --protocol given), a request asking for the other framing is refused with 400.
  bool protocol_fixed = false;
  std::vector<std::string> http_paths;  // import paths besides /import_raw_vdi and /services/SM/data/
  std::chrono::seconds idle_timeout{300};  // drop a sender silent this long (0: never)

  // NBD.
  std::vector<ExportSpec> exports;  // only these names are served
  bool read_only = false;
  std::string tls_mode;  // "require" or "off"; empty: require when credentials are given
  // Event-loop threads serving connections (0: one per CPU, at most 8; never more than
  // max_threads). Chunked and raw use one: a single image is written by one sender at
  // a time.
  static constexpr std::size_t max_threads = 64;
  std::size_t threads = 0;

  // Both.
  bool once = false;    // serve one connection; run() returns its result
  bool direct = false;  // O_DIRECT writes
  bool zero_copy = true;  // splice payloads between plain sockets and the storage
  // Refuse connections beyond this many at once. Chunked and raw into a file take one
  // (two senders would interleave two images): 0 picks that, or 16 otherwise. A bound
  // on descriptors and memory, so it is itself bounded.
  static constexpr std::size_t max_connections_limit = 4096;
  std::size_t max_connections = 0;
  // Connections still in their handshake (TLS, NBD's option haggling) count apart from
  // those served, so that clients that never finish it cannot lock out those that do:
  // more than this many at once are refused (0: 64; at most max_connections_limit).
  std::size_t max_handshakes = 0;
  // TLS, NBD option haggling, the HTTP request. Peers that mean it take a few round
  // trips, well under a second even far away; 10 s bounds how long a silent one holds
  // a handshake slot.
  std::chrono::seconds handshake_timeout{10};
  TlsOptions tls;  // tls:// listeners and NBD STARTTLS: certificate and key, or a PSK file
  StreamOptions stream;

  // What happens, for the embedder to show or log; each is called on the loop that
  // serves the connection, and unset ones are dropped (the library never prints).
  std::function<void(const ReceiveProgress&)> progress;  // Chunked and raw
  std::function<void(const ReceivedImage&)> received;    // Chunked and raw
  // A connection that failed while the receiver goes on (not with `once`, where it is
  // run()'s result).
  std::function<void(const Error&)> connection_failed;
};

}  // namespace sluice
