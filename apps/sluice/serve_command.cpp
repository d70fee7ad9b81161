#include "apps/sluice/serve_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "apps/libsluice/receiver.hpp"
#include "apps/sluice/option_table.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/progress_reporter.hpp"
#include "apps/sluice/tls_flags.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"
#include "engine/stop_signals.hpp"

namespace sluice::cli {

namespace {

struct ServeOptions {
  ReceiverOptions receiver;
  std::optional<ProgressStyle> progress;  // chunked and raw
  bool idle_timeout_given = false;
};

// `sluice serve`'s options, filling `serve`.
OptionTable serve_options(ServeOptions& serve) {
  ReceiverOptions& o = serve.receiver;
  OptionTable table(
      "usage: sluice serve --listen URI [--protocol chunked|raw|nbd] [options]\n"
      "\n"
      "Receives images. URI: tcp://HOST:PORT, tls://HOST:PORT or unix:///PATH.\n"
      "\n");
  // A second --listen or --output used to replace the first without a word: a server
  // listening somewhere other than where the user thinks is refused instead.
  table.add({{"listen"}, Takes::value, "URI", "where to listen", [&o](const char* value) {
    if (!o.listen.empty()) throw UsageError("--listen given twice: a serve listens on one address");
    o.listen = value;
  }});
  table.add({{"protocol"}, Takes::value, "chunked|raw|nbd", "what senders speak (default chunked)",
             [&o](const char* value) {
               o.protocol = value;
               if (o.protocol != "chunked" && o.protocol != "raw" && o.protocol != "nbd")
                 throw UsageError("--protocol must be chunked, raw or nbd");
               o.protocol_fixed = true;
             }});
  table.text("\nChunked and raw (xen-api's vhd-tool protocols):\n");
  table.add({{"output"}, Takes::value, "PATH",
             "where the image is written (file or block device);\n"
             "null: keeps nothing (a link test; needs --size)",
             [&o](const char* value) {
               if (!o.output.empty()) throw UsageError("--output given twice: a serve writes one image");
               o.output = value;
             }});
  table.add({{"size"}, Takes::value, "BYTES", "the image's size (default: the output's size)",
             [&o](const char* value) { o.size = size_argument("size", value); }});
  table.add({{"http"}, Takes::nothing, "",
             "answer the xen-api import PUT before the body; each\n"
             "request's framing is its own, as xapi's: a 'chunked'\n"
             "cookie or query parameter means Chunked, none a raw\n"
             "body of the image's size (--protocol, given, constrains it)",
             [&o](const char*) { o.http = true; }});
  table.add({{"http-path"}, Takes::value, "PATH",
             "also import at PATH (besides /import_raw_vdi and\n"
             "/services/SM/data/...; repeatable)",
             [&o](const char* value) {
               if (value[0] != '/') throw UsageError(std::string("--http-path must start with '/' (got '") + value + "')");
               o.http_paths.emplace_back(value);
             }});
  table.add({{"once"}, Takes::nothing, "", "serve one connection, exit with its result",
             [&o](const char*) { o.once = true; }});
  table.add({{"direct"}, Takes::nothing, "", "O_DIRECT writes", [&o](const char*) { o.direct = true; }});
  table.add({{"no-zero-copy"}, Takes::nothing, "",
             "read payloads into memory instead of splicing them from\n"
             "a plain socket into the output (NBD: READ data and WRITE\n"
             "payloads through memory instead of spliced between the\n"
             "socket and the export)",
             [&o](const char*) { o.zero_copy = false; }});
  table.add({{"progress"}, Takes::optional_value, "[=bar|json|xapi]", "a display per sender",
             [&serve](const char* value) {
               auto style = parse_progress_style(value ? value : "", isatty(STDERR_FILENO) != 0);
               if (!style) throw UsageError(std::string("--progress: unknown style '") + value + "'");
               serve.progress = *style;
             }});
  table.add({{"idle-timeout"}, Takes::value, "S",
             "drop a sender that sends nothing for S seconds (default\n"
             "300; 0: wait forever)",
             [&serve](const char* value) {
               serve.receiver.idle_timeout = seconds_argument("idle-timeout", value);
               serve.idle_timeout_given = true;
             }});
  table.text("\nNBD:\n");
  table.add({{"export"}, Takes::value, "NAME=PATH", "an export (repeatable); only configured names are served",
             [&o](const char* value) {
               std::string spec = value;
               auto eq = spec.find('=');
               if (eq == std::string::npos || eq + 1 == spec.size())
                 throw UsageError("--export takes NAME=PATH (got '" + spec + "')");
               o.exports.push_back(ExportSpec{spec.substr(0, eq), spec.substr(eq + 1)});
             }});
  table.add({{"read-only"}, Takes::nothing, "", "refuse writes", [&o](const char*) { o.read_only = true; }});
  table.add({{"tls"}, Takes::value, "=require|off", "STARTTLS policy (require when credentials are given)",
             [&o](const char* value) {
               o.tls_mode = value;
               if (o.tls_mode != "require" && o.tls_mode != "off") throw UsageError("--tls must be require or off");
             }});
  table.add({{"max-connections"}, Takes::value, "N",
             "serve at most N clients at once; more that finish their\n"
             "handshake are refused (NBD: GO gets an error saying so)\n"
             "(default 16; chunked and raw into a file: 1, one sender\n"
             "at a time)",
             [&o](const char* value) {
               o.max_connections = static_cast<std::size_t>(
                   count_between("max-connections", value, 1, ReceiverOptions::max_connections_limit));
             }});
  table.add({{"max-handshakes"}, Takes::value, "N",
             "at most N clients in the handshake (TLS's, NBD's) at once,\n"
             "counted apart from those served; more are refused at once\n"
             "(NBD: with an error naming the limit) (default 64)",
             [&o](const char* value) {
               o.max_handshakes = static_cast<std::size_t>(
                   count_between("max-handshakes", value, 1, ReceiverOptions::max_connections_limit));
             }});
  table.add({{"threads"}, Takes::value, "N",
             "event-loop threads serving connections, each connection\n"
             "on one of them (default: one per CPU, at most 8)",
             [&o](const char* value) {
               o.threads = static_cast<std::size_t>(count_between("threads", value, 1, ReceiverOptions::max_threads));
             }});
  table.add({{"handshake-timeout"}, Takes::value, "S",
             "drop clients stalled in the handshake, TLS's or NBD's, or\n"
             "in sending the HTTP request (default 10)",
             [&o](const char* value) {
               auto n = seconds_argument("handshake-timeout", value);
               if (n.count() == 0) throw UsageError("--handshake-timeout must be at least 1 second");
               o.handshake_timeout = n;
             }});
  table.text("\nTLS (tls:// listeners, NBD STARTTLS):\n");
  table.add(tls_flags(o.tls, TlsSide::server));
  table.text("\n");
  table.add({{"no-nodelay"}, Takes::nothing, "", "leave Nagle's algorithm on (for comparisons)",
             [&o](const char*) { o.stream.nodelay = false; }});
  table.text(
      "\n"
      "Runs until SIGTERM or SIGINT (or after one connection with --once), finishing\n"
      "the requests in flight and flushing before it exits. A chunked or raw transfer\n"
      "in progress is waited for; a second signal aborts it (exit status 1).\n");
  return table;
}

ServeOptions parse(int argc, char** argv) {
  ServeOptions serve;
  ReceiverOptions& o = serve.receiver;
  const std::vector<std::string> operands = serve_options(serve).parse(argc, argv);
  if (!operands.empty()) throw UsageError("unexpected argument '" + operands[0] + "'");
  // Flags the library cannot see as given or not; it checks the rest (Receiver::check).
  if (o.protocol == "nbd") {
    if (serve.progress) throw UsageError("--progress is for chunked and raw");
    if (serve.idle_timeout_given) throw UsageError("--idle-timeout is for chunked and raw");
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
