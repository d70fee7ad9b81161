#include "apps/sluice/serve_command.hpp"

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "apps/sluice/option_scan.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/serve_service.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"
#include "engine/loop_threads.hpp"
#include "engine/net/address.hpp"
#include "engine/net/server_loop.hpp"
#include "engine/net/socket_file_remover.hpp"
#include "engine/stop_signals.hpp"

namespace sluice::cli {

namespace {

void serve_usage() {
  std::fputs(
      "usage: sluice serve --listen URI [--protocol chunked|raw|nbd] [options]\n"
      "\n"
      "Receives images. URI: tcp://HOST:PORT, tls://HOST:PORT or unix:///PATH.\n"
      "\n"
      "Chunked and raw (xen-api's vhd-tool protocols):\n"
      "  --output PATH         where the image is written (file or block device);\n"
      "                        null: keeps nothing (a link test; needs --size)\n"
      "  --size BYTES          the image's size (default: the output's size)\n"
      "  --http                answer the xen-api import PUT before the body\n"
      "  --once                serve one connection, exit with its result\n"
      "  --direct              O_DIRECT writes\n"
      "  --no-zero-copy        read payloads into memory instead of splicing them from\n"
      "                        a plain socket into the output (NBD: READ data and WRITE\n"
      "                        payloads through memory instead of spliced between the\n"
      "                        socket and the export)\n"
      "  --progress[=bar|json|xapi]\n"
      "  --idle-timeout S      drop a sender that sends nothing for S seconds (default\n"
      "                        300; 0: wait forever)\n"
      "\n"
      "NBD:\n"
      "  --export NAME=PATH    an export (repeatable); only configured names are served\n"
      "  --read-only           refuse writes\n"
      "  --tls=require|off     STARTTLS policy (require when credentials are given)\n"
      "  --max-connections N   refuse connections beyond N (default 16; chunked and raw\n"
      "                        into a file: 1, one sender at a time)\n"
      "  --threads N           event-loop threads serving connections, each connection\n"
      "                        on one of them (default: one per CPU, at most 8)\n"
      "  --handshake-timeout S drop clients stalled in the handshake, TLS's or NBD's, or\n"
      "                        in sending the HTTP request (default 30)\n"
      "\n"
      "TLS (tls:// listeners, NBD STARTTLS):\n"
      "  --tls-cert FILE --tls-key FILE   the server's certificate and key\n"
      "  --tls-ca FILE         require client certificates signed by this CA\n"
      "  --tls-psk-file FILE   pre-shared keys, identity:hexkey lines\n"
      "  --tls-ciphers LIST, --tls-ciphersuites LIST, --tls12\n"
      "\n"
      "  --no-nodelay          leave Nagle's algorithm on (for comparisons)\n"
      "\n"
      "Runs until SIGTERM or SIGINT (or after one connection with --once), finishing\n"
      "the requests in flight and flushing before it exits. A chunked or raw transfer\n"
      "in progress is waited for; a second signal aborts it (exit status 1).\n",
      stdout);
}

enum Option {
  opt_listen = 256, opt_protocol, opt_http, opt_output, opt_size, opt_once, opt_direct, opt_no_zero_copy, opt_progress,
  opt_export, opt_read_only, opt_tls, opt_max_connections, opt_threads, opt_handshake_timeout, opt_idle_timeout,
  opt_tls_cert, opt_tls_key,
  opt_tls_ca, opt_tls_psk_file, opt_tls_ciphers, opt_tls_ciphersuites, opt_tls12, opt_no_nodelay, opt_help,
};

// Whatever adjusts TLS without saying who we are (certificate or PSK).
bool tls_tuning_given(TlsOptions tls) {
  tls.certificate.clear();
  tls.psk_file.clear();
  return tls != TlsOptions{};
}

ServeOptions parse(int argc, char** argv) {
  static const struct option options[] = {
      {"listen", required_argument, nullptr, opt_listen},
      {"protocol", required_argument, nullptr, opt_protocol},
      {"http", no_argument, nullptr, opt_http},
      {"output", required_argument, nullptr, opt_output},
      {"size", required_argument, nullptr, opt_size},
      {"once", no_argument, nullptr, opt_once},
      {"direct", no_argument, nullptr, opt_direct},
      {"no-zero-copy", no_argument, nullptr, opt_no_zero_copy},
      {"progress", optional_argument, nullptr, opt_progress},
      {"export", required_argument, nullptr, opt_export},
      {"read-only", no_argument, nullptr, opt_read_only},
      {"tls", required_argument, nullptr, opt_tls},
      {"max-connections", required_argument, nullptr, opt_max_connections},
      {"threads", required_argument, nullptr, opt_threads},
      {"handshake-timeout", required_argument, nullptr, opt_handshake_timeout},
      {"idle-timeout", required_argument, nullptr, opt_idle_timeout},
      {"tls-cert", required_argument, nullptr, opt_tls_cert},
      {"tls-key", required_argument, nullptr, opt_tls_key},
      {"tls-ca", required_argument, nullptr, opt_tls_ca},
      {"tls-psk-file", required_argument, nullptr, opt_tls_psk_file},
      {"tls-ciphers", required_argument, nullptr, opt_tls_ciphers},
      {"tls-ciphersuites", required_argument, nullptr, opt_tls_ciphersuites},
      {"tls12", no_argument, nullptr, opt_tls12},
      {"no-nodelay", no_argument, nullptr, opt_no_nodelay},
      {"help", no_argument, nullptr, opt_help},
      {nullptr, 0, nullptr, 0},
  };
  ServeOptions o;
  bool max_connections_given = false;
  bool idle_timeout_given = false;
  begin_option_scan();
  int c;
  while ((c = getopt_long(argc, argv, short_options, options, nullptr)) != -1) {
    switch (c) {
      // A second --listen or --output used to replace the first without a word: a
      // server listening somewhere other than where the user thinks is refused instead.
      case opt_listen:
        if (!o.listen.empty()) throw UsageError("--listen given twice: a serve listens on one address");
        o.listen = optarg;
        break;
      case opt_protocol:
        o.protocol = optarg;
        if (o.protocol != "chunked" && o.protocol != "raw" && o.protocol != "nbd")
          throw UsageError("--protocol must be chunked, raw or nbd");
        break;
      case opt_http: o.http = true; break;
      case opt_output:
        if (!o.output.empty()) throw UsageError("--output given twice: a serve writes one image");
        o.output = optarg;
        break;
      case opt_size: o.size = size_argument("size", optarg); break;
      case opt_once: o.once = true; break;
      case opt_direct: o.direct = true; break;
      case opt_no_zero_copy: o.zero_copy = false; break;
      case opt_progress: {
        auto style = parse_progress_style(optarg ? optarg : "", isatty(STDERR_FILENO) != 0);
        if (!style) throw UsageError(std::string("--progress: unknown style '") + optarg + "'");
        o.progress = *style;
        break;
      }
      case opt_export: {
        std::string spec = optarg;
        auto eq = spec.find('=');
        if (eq == std::string::npos || eq + 1 == spec.size())
          throw UsageError("--export takes NAME=PATH (got '" + spec + "')");
        o.exports.push_back(ExportSpec{spec.substr(0, eq), spec.substr(eq + 1)});
        break;
      }
      case opt_read_only: o.read_only = true; break;
      case opt_tls:
        o.tls_mode = optarg;
        if (o.tls_mode != "require" && o.tls_mode != "off") throw UsageError("--tls must be require or off");
        break;
      case opt_max_connections: {
        auto n = count_argument("max-connections", optarg);
        if (n == 0 || n > 4096) throw UsageError("--max-connections must be between 1 and 4096");
        o.max_connections = static_cast<std::size_t>(n);
        max_connections_given = true;
        break;
      }
      case opt_threads: {
        auto n = count_argument("threads", optarg);
        if (n == 0 || n > 64) throw UsageError("--threads must be between 1 and 64");
        o.threads = static_cast<std::size_t>(n);
        break;
      }
      case opt_idle_timeout:
        o.idle_timeout = seconds_argument("idle-timeout", optarg);
        idle_timeout_given = true;
        break;
      case opt_handshake_timeout: {
        auto n = seconds_argument("handshake-timeout", optarg);
        if (n.count() == 0) throw UsageError("--handshake-timeout must be at least 1 second");
        o.handshake_timeout = n;
        break;
      }
      case opt_tls_cert: o.tls.certificate = optarg; break;
      case opt_tls_key: o.tls.private_key = optarg; break;
      case opt_tls_ca: o.tls.ca_file = optarg; break;
      case opt_tls_psk_file: o.tls.psk_file = optarg; break;
      case opt_tls_ciphers: o.tls.ciphers = optarg; break;
      case opt_tls_ciphersuites: o.tls.ciphersuites = optarg; break;
      case opt_tls12: o.tls.tls12_only = true; break;
      case opt_no_nodelay: o.stream.nodelay = false; break;
      case opt_help:
      case 'h': serve_usage(); std::exit(exit_ok);
      default: {
        std::string bad = argv[optind - 1] ? argv[optind - 1] : "?";
        throw UsageError("unknown or incomplete option '" + bad + "'");
      }
    }
  }
  if (optind != argc) throw UsageError(std::string("unexpected argument '") + argv[optind] + "'");
  if (o.listen.empty()) throw UsageError("serve needs --listen URI");
  // An option the chosen protocol has no use for is refused rather than ignored: a
  // --size or --tls-ca that silently does nothing leaves the operator believing in a
  // check or an encryption that is not there.
  if (o.protocol == "nbd") {
    if (o.exports.empty()) throw UsageError("--protocol nbd needs at least one --export NAME=PATH");
    if (!o.output.empty() || o.http) throw UsageError("--output and --http are for chunked and raw");
    if (o.size) throw UsageError("--size is for chunked and raw: an NBD export has its file's size");
    if (o.progress) throw UsageError("--progress is for chunked and raw");
    if (idle_timeout_given) throw UsageError("--idle-timeout is for chunked and raw");
    const bool credentials = !o.tls.certificate.empty() || !o.tls.psk_file.empty();
    if (!credentials && tls_tuning_given(o.tls))
      throw UsageError("--tls-key, --tls-ca, --tls-ciphers, --tls-ciphersuites and --tls12 shape TLS, which needs "
                       "--tls-cert or --tls-psk-file");
  } else {
    if (o.output.empty()) throw UsageError("--protocol " + o.protocol + " needs --output PATH");
    if (!o.exports.empty()) throw UsageError("--export is for --protocol nbd");
    if (o.read_only) throw UsageError("--read-only is for --protocol nbd");
    if (!o.tls_mode.empty())
      throw UsageError("--tls=" + o.tls_mode + " is NBD's STARTTLS policy: chunked and raw are encrypted by "
                       "listening on tls://");
    if (o.output == "null:" && o.direct) throw UsageError("--direct is for a file or block device, not null:");
    if (o.size && *o.size == 0) throw UsageError("--size must not be 0");
    if (o.output == "null:" && !o.size)
      throw UsageError("--output null: keeps nothing and so has no size: give --size BYTES");
    // One image written by one connection at a time: more loops would only wait.
    if (o.threads > 1) throw UsageError("--threads is for --protocol nbd");
    o.threads = 1;
    // Two senders at once would interleave two images in one file: the second is
    // refused while the first is served.
    if (o.output != "null:") {
      if (max_connections_given && o.max_connections > 1)
        throw UsageError("--max-connections: one sender at a time writes --output (chunked and raw)");
      o.max_connections = 1;
    }
  }
  if (o.threads == 0) o.threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  if (!o.tls.certificate.empty() && o.tls.private_key.empty()) o.tls.private_key = o.tls.certificate;
  return o;
}

}  // namespace

int serve_command(int argc, char** argv) {
  ServeOptions options = parse(argc, argv);
  auto where = parse_socket_uri(options.listen);
  if (!where) throw UsageError("--listen: " + where.error().message);

  asio::io_context context(1);
  auto ex = context.get_executor();
  ServerLoopOptions loop_options;
  loop_options.once = options.once;
  loop_options.max_connections = options.max_connections;
  loop_options.stream = options.stream;
  loop_options.handshake_timeout = options.handshake_timeout;
  if (options.protocol != "nbd" && !where->tls && options.tls != TlsOptions{})
    throw UsageError("the --tls-* options need a tls:// listener: " + options.listen + " is plaintext");
  if (where->tls) {
    if (options.protocol == "nbd")
      throw UsageError("NBD negotiates TLS itself (STARTTLS): listen on tcp:// with --tls-cert/--tls-key");
    if (options.tls.certificate.empty() && options.tls.psk_file.empty())
      throw UsageError("a tls:// listener needs --tls-cert and --tls-key, or --tls-psk-file");
    auto tls = TlsContext::create(TlsRole::server, options.tls);
    if (!tls) {
      std::fprintf(stderr, "sluice: %s\n", printable(tls.error().message).c_str());
      return exit_transfer_error;
    }
    // Chunked and raw are one-way: a client never reads TLS 1.3 session tickets, and
    // unread bytes make its close a reset that can cut off the end of the stream.
    SSL_CTX_set_num_tickets((*tls)->native(), 0);
    loop_options.tls = *tls;
  }

  std::vector<UniqueFd> device_claims;
  if (options.protocol == "nbd") {
    auto claims = claim_export_devices(options);
    if (!claims) {
      std::fprintf(stderr, "sluice: %s\n", printable(claims.error().message).c_str());
      return exit_transfer_error;
    }
    device_claims = std::move(*claims);
  }

  // The main loop accepts and serves; each further thread runs a loop of its own with
  // its own service (its own open exports), so connections share nothing across threads
  // but the claims on block devices, taken once above (a duplicate of the claim is
  // each loop's descriptor of the device).
  LoopThreads extra_loops(options.threads - 1);
  std::vector<executor> loops{ex};
  for (std::size_t i = 0; i < extra_loops.size(); ++i) loops.push_back(extra_loops.at(i));
  std::vector<ServerWorker> workers;
  std::vector<std::function<void()>> stops;  // one per loop, run on that loop
  std::vector<std::function<void()>> aborts;  // likewise; empty where stop is prompt
  for (const executor& loop_ex : loops) {
    auto service =
        options.protocol == "nbd" ? make_nbd_service(loop_ex, options, device_claims)
                                  : make_stream_receiver(loop_ex, options);
    if (!service) {
      std::fprintf(stderr, "sluice: %s\n", printable(service.error().message).c_str());
      return exit_transfer_error;
    }
    workers.push_back(ServerWorker{loop_ex, std::move(service->handler)});
    stops.push_back(std::move(service->stop));
    aborts.push_back(std::move(service->abort));
  }
  // From the listening socket until the handler is in place, a stop signal waits
  // rather than killing the server half set up (its socket file left behind); before
  // that it ends the process, so opening a slow output can still be interrupted. The
  // loop threads, started meanwhile, keep the signals blocked: the main thread is the
  // one that takes them.
  hold_stop_signals();
  auto acceptor = listen_on(ex, where->address);
  if (!acceptor) {
    std::fprintf(stderr, "sluice: %s\n", printable(acceptor.error().message).c_str());
    return exit_transfer_error;
  }
  std::optional<SocketFileRemover> socket_file;
  if (where->address.kind == NetAddress::Kind::unix_socket) socket_file.emplace(where->address.path);
  ServerLoop loop(std::move(*acceptor), std::move(workers), loop_options);
  extra_loops.start();

  // The first SIGTERM or SIGINT stops accepting and lets what is in flight finish; a
  // transfer can take as long as its image, so a second one cuts it short.
  bool aborted = false;
  const bool can_abort = !aborts.empty() && static_cast<bool>(aborts.front());
  auto stop = [&] {
    loop.stop();
    // Each service winds down on its own loop's thread.
    for (std::size_t i = 0; i < loops.size(); ++i) asio::post(loops[i], stops[i]);
    if (loop.active() > 0 && can_abort)
      std::fprintf(stderr, "sluice: stopping: no new connections; waiting for %zu in progress to finish (signal "
                           "again to abort)\n", loop.active());
  };
  auto cut_short = [&] {
    if (!can_abort || loop.active() == 0) return;
    aborted = true;
    std::fputs("sluice: aborting the transfers in progress\n", stderr);
    for (std::size_t i = 0; i < loops.size(); ++i) asio::post(loops[i], aborts[i]);
  };
  StopSignals signals(ex, stop, cut_short);
  release_stop_signals();

  std::optional<Status> result;
  asio::co_spawn(context, loop.run(), [&](std::exception_ptr error, Status status) {
    result = error ? fail(std::errc::io_error, "internal error in the server") : std::move(status);
    signals.finish();
  });
  context.run();
  extra_loops.stop();
  hold_stop_signals();  // finished: the exit status is decided
  if (!result || !*result) {
    std::fprintf(stderr, "sluice: %s\n",
                 printable(result ? (*result).error().message : "the server did not finish").c_str());
    return exit_transfer_error;
  }
  return aborted ? exit_transfer_error : exit_ok;
}

}  // namespace sluice::cli
