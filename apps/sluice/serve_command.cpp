#include "apps/sluice/serve_command.hpp"

#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "apps/libsluice/receiver.hpp"
#include "apps/sluice/option_scan.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/progress_reporter.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"
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
      "  --max-connections N   serve at most N clients at once; more that finish their\n"
      "                        handshake are refused (NBD: GO gets an error saying so)\n"
      "                        (default 16; chunked and raw into a file: 1, one sender\n"
      "                        at a time)\n"
      "  --max-handshakes N    at most N clients in the handshake (TLS's, NBD's) at once,\n"
      "                        counted apart from those served; more are refused at once\n"
      "                        (NBD: with an error naming the limit) (default 64)\n"
      "  --threads N           event-loop threads serving connections, each connection\n"
      "                        on one of them (default: one per CPU, at most 8)\n"
      "  --handshake-timeout S drop clients stalled in the handshake, TLS's or NBD's, or\n"
      "                        in sending the HTTP request (default 10)\n"
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
  opt_export, opt_read_only, opt_tls, opt_max_connections, opt_max_handshakes, opt_threads, opt_handshake_timeout, opt_idle_timeout,
  opt_tls_cert, opt_tls_key,
  opt_tls_ca, opt_tls_psk_file, opt_tls_ciphers, opt_tls_ciphersuites, opt_tls12, opt_no_nodelay, opt_help,
};

struct ServeOptions {
  ReceiverOptions receiver;
  std::optional<ProgressStyle> progress;  // chunked and raw
};

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
      {"max-handshakes", required_argument, nullptr, opt_max_handshakes},
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
  ServeOptions serve;
  ReceiverOptions& o = serve.receiver;
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
        serve.progress = *style;
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
        // 0 means "the default" to the library, not to someone who typed it; the upper
        // bound is the library's (Receiver::check).
        if (n == 0)
          throw UsageError("--max-connections must be between 1 and " +
                           std::to_string(ReceiverOptions::max_connections_limit));
        o.max_connections = static_cast<std::size_t>(n);
        break;
      }
      case opt_max_handshakes: {
        auto n = count_argument("max-handshakes", optarg);
        if (n == 0)
          throw UsageError("--max-handshakes must be between 1 and " +
                           std::to_string(ReceiverOptions::max_connections_limit));
        o.max_handshakes = static_cast<std::size_t>(n);
        break;
      }
      case opt_threads: {
        auto n = count_argument("threads", optarg);
        if (n == 0)
          throw UsageError("--threads must be between 1 and " + std::to_string(ReceiverOptions::max_threads));
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
  // Flags the library cannot see as given or not; it checks the rest (Receiver::check).
  if (o.protocol == "nbd") {
    if (serve.progress) throw UsageError("--progress is for chunked and raw");
    if (idle_timeout_given) throw UsageError("--idle-timeout is for chunked and raw");
  }
  if (Status fits = Receiver::check(o); !fits) throw UsageError(fits.error().message);
  return serve;
}

// One progress display per sender, as `sluice copy` shows its one copy.
class ProgressDisplays {
 public:
  explicit ProgressDisplays(ProgressStyle style) : style_(style) {}
  void show(const ReceiveProgress& progress) {
    auto at = displays_.try_emplace(progress.connection, style_).first;
    if (!progress.finished) return at->second.update(progress.update);
    at->second.finish(progress.update, progress.succeeded);
    displays_.erase(at);
  }

 private:
  ProgressStyle style_;
  std::map<std::uint64_t, ProgressReporter> displays_;
};

void say_received(const ReceivedImage& image) {
  const bool discarded = image.output == null_output;
  std::fprintf(stderr, "sluice: %s: received %llu bytes in %llu writes%s%s into %s (%s)\n", image.peer.c_str(),
               static_cast<unsigned long long>(image.bytes_written), static_cast<unsigned long long>(image.writes),
               image.tls_cipher.empty() ? "" : " over TLS ", image.tls_cipher.c_str(), image.output.c_str(),
               discarded ? "discarded" : "flushed");
}

void say_error(const Error& error) { std::fprintf(stderr, "sluice: %s\n", printable(error.message).c_str()); }

}  // namespace

int serve_command(int argc, char** argv) {
  ServeOptions serve = parse(argc, argv);
  ReceiverOptions& options = serve.receiver;
  std::shared_ptr<ProgressDisplays> displays;
  if (serve.progress) {
    displays = std::make_shared<ProgressDisplays>(*serve.progress);
    options.progress = [displays](const ReceiveProgress& progress) { displays->show(progress); };
  }
  options.received = say_received;
  options.connection_failed = say_error;
  const bool can_abort = options.protocol != "nbd";  // NBD requests are short: stopping is prompt

  asio::io_context context(1);
  auto receiver = Receiver::create(context.get_executor(), options);
  if (!receiver) {
    say_error(receiver.error());
    return exit_transfer_error;
  }
  // From the listening socket until the signals are taken, a stop signal waits rather
  // than killing the server half set up (its socket file left behind); before that it
  // ends the process, so opening a slow output can still be interrupted. The loop
  // threads, started meanwhile, keep the signals blocked: the main thread is the one
  // that takes them.
  hold_stop_signals();
  if (Status listening = (*receiver)->listen(); !listening) {
    say_error(listening.error());
    return exit_transfer_error;
  }

  // The first SIGTERM or SIGINT stops accepting and lets what is in flight finish; a
  // transfer can take as long as its image, so a second one cuts it short.
  Receiver& r = **receiver;
  auto stop = [&] {
    r.stop();
    if (r.active() > 0 && can_abort)
      std::fprintf(stderr, "sluice: stopping: no new connections; waiting for %zu in progress to finish (signal "
                           "again to abort)\n", r.active());
  };
  auto cut_short = [&] {
    if (!can_abort || r.active() == 0) return;
    std::fputs("sluice: aborting the transfers in progress\n", stderr);
    r.abort();
  };
  StopSignals signals(context.get_executor(), stop, cut_short);
  release_stop_signals();

  std::optional<Status> result;
  asio::co_spawn(context, r.run(), [&](std::exception_ptr error, Status status) {
    result = error ? fail(std::errc::io_error, "internal error in the server") : std::move(status);
    signals.finish();
  });
  context.run();
  hold_stop_signals();  // finished: the exit status is decided
  if (!result) {
    say_error(Error{std::make_error_code(std::errc::io_error), "the server did not finish"});
    return exit_transfer_error;
  }
  if (!*result) {
    say_error((*result).error());
    return exit_transfer_error;
  }
  return exit_ok;
}

}  // namespace sluice::cli
