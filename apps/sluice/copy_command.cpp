#include "apps/sluice/copy_command.hpp"

#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "apps/libsluice/sluice.hpp"
#include "apps/sluice/endpoint_flags.hpp"
#include "apps/sluice/option_scan.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/progress_reporter.hpp"
#include "apps/sluice/stats_json.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"
#include "engine/stop_signals.hpp"

namespace sluice::cli {

void copy_usage() {
  std::printf(
      "usage: sluice copy [options] SOURCE DESTINATION\n"
      "\n"
      "SOURCE and DESTINATION: a path or file:///path (regular file or block device), or an\n"
      "NBD export: nbd://H[:P]/EXPORT, nbds://... (TLS required), nbd+unix:///EXPORT?socket=PATH,\n"
      "nbds+unix://..., with ?tls-certificates=DIR, tls-psk-file=FILE, tls-hostname=NAME,\n"
      "tls-verify-peer=false. DESTINATION may also be null: (read the source, keep nothing).\n"
      "\n"
      "  --depth N             requests in flight (default 8; more to an NBD server\n"
      "                        far away: two round trips at 10 Gbit/s, up to 64 MiB)\n"
      "  --request-size SIZE   bytes per request, e.g. 256k, 2M (default 1M; 2M when\n"
      "                        the payload is spliced, never read by sluice)\n"
      "  --lanes N             copy stripes of the image side by side, each on a thread\n"
      "                        of its own, sharing --depth (default: one per CPU, up to\n"
      "                        4, where both ends allow it: a local file to null:)\n"
      "  --sparse=SIZE         zero-detection granularity in read data; 0 turns it off\n"
      "                        (default 4k)\n"
      "  --prezeroed, --destination-is-zero\n"
      "                        the destination already reads as zeros: skip zero ranges\n"
      "  --allocated           zeroed ranges stay allocated (no holes; NBD: NO_HOLE)\n"
      "  --direct              O_DIRECT for local files (bypass the page cache)\n"
      "  --no-flush            do not flush the destination at the end\n"
      "  --no-zero-copy        copy file data through memory even where it could be\n"
      "                        spliced (to a file, a plain Chunked/raw socket)\n"
      "  --zero-copy           splice wherever possible, NBD destinations too (there\n"
      "                        buffered WRITEs measured faster, so not by default)\n"
      "  --progress[=bar|json|xapi]\n"
      "                        bar (stderr, default on a terminal), json lines (stderr),\n"
      "                        or xen-api's 000..100 digits on stdout\n"
      "  --stats               print a JSON summary at the end (stdout; stderr with\n"
      "                        --progress=xapi), with the copy's plan: request size,\n"
      "                        depth, lanes, buffers, zero-copy, zero detection\n"
      "\n"
      "Network destinations: tcp://H:P, tls://H:P, unix:///PATH, http(s)://H[:P]/PATH?Q\n"
      "%s"
      "\n"
      "SIGINT (Ctrl-C) or SIGTERM cancels the copy: the requests in flight are waited\n"
      "for, then it exits 1. A second one exits 1 at once, without waiting.\n"
      "\n"
      "Exit status: 0 when every byte landed and was flushed, 1 on a transfer error,\n"
      "2 on a usage error (a malformed or unknown SOURCE or DESTINATION included).\n",
      endpoint_flags_help);
}

namespace {

enum Option {
  opt_depth = 256,
  opt_request_size,
  opt_sparse,
  opt_prezeroed,
  opt_allocated,
  opt_direct,
  opt_lanes,
  opt_no_flush,
  opt_no_zero_copy,
  opt_zero_copy,
  opt_progress,
  opt_stats,
  opt_help,
};

struct CopyRequest {
  std::string source;
  std::string destination;
  EndpointOptions endpoints;
  CopyOptions copy;
  std::optional<ProgressStyle> progress;
  bool stats = false;
};

CopyRequest parse(int argc, char** argv) {
  std::vector<struct option> options = {
      {"depth", required_argument, nullptr, opt_depth},
      {"request-size", required_argument, nullptr, opt_request_size},
      {"sparse", required_argument, nullptr, opt_sparse},
      {"prezeroed", no_argument, nullptr, opt_prezeroed},
      {"destination-is-zero", no_argument, nullptr, opt_prezeroed},
      {"target-is-zero", no_argument, nullptr, opt_prezeroed},
      {"allocated", no_argument, nullptr, opt_allocated},
      {"direct", no_argument, nullptr, opt_direct},
      {"lanes", required_argument, nullptr, opt_lanes},
      {"no-flush", no_argument, nullptr, opt_no_flush},
      {"no-zero-copy", no_argument, nullptr, opt_no_zero_copy},
      {"zero-copy", no_argument, nullptr, opt_zero_copy},
      {"progress", optional_argument, nullptr, opt_progress},
      {"stats", no_argument, nullptr, opt_stats},
      {"help", no_argument, nullptr, opt_help},
  };
  options.insert(options.end(), endpoint_flags().begin(), endpoint_flags().end());
  options.push_back({nullptr, 0, nullptr, 0});
  CopyRequest request;
  begin_option_scan();
  int c;
  while ((c = getopt_long(argc, argv, short_options, options.data(), nullptr)) != -1) {
    switch (c) {
      case opt_depth: {
        auto depth = count_argument("depth", optarg);
        if (depth == 0 || depth > 1024) throw UsageError("--depth must be between 1 and 1024");
        request.copy.depth = static_cast<std::size_t>(depth);
        break;
      }
      case opt_lanes: {
        auto lanes = count_argument("lanes", optarg);
        if (lanes == 0 || lanes > 64) throw UsageError("--lanes must be between 1 and 64");
        request.copy.lanes = static_cast<std::size_t>(lanes);
        break;
      }
      case opt_request_size: {
        auto size = size_argument("request-size", optarg);
        if (size < 4096 || size > (32u << 20) || size % 4096 != 0)
          throw UsageError("--request-size must be a multiple of 4k between 4k and 32M");
        request.copy.request_size = static_cast<std::size_t>(size);
        break;
      }
      case opt_sparse: {
        auto size = size_argument("sparse", optarg);
        // Whole sectors: zero runs become requests that every destination can address.
        if (size != 0 && (size < 512 || size > (32u << 20) || size % 512 != 0))
          throw UsageError("--sparse must be 0 (off) or a multiple of 512 from 512 to 32M");
        request.copy.sparse = static_cast<std::size_t>(size);
        break;
      }
      case opt_prezeroed: request.copy.destination_is_zero = true; break;
      case opt_allocated: request.copy.allocated = true; break;
      case opt_direct: request.endpoints.file.direct = true; break;
      case opt_no_flush: request.copy.flush = false; break;
      case opt_no_zero_copy: request.copy.zero_copy = ZeroCopy::never; break;
      case opt_zero_copy: request.copy.zero_copy = ZeroCopy::always; break;
      case opt_progress: {
        auto style = parse_progress_style(optarg ? optarg : "", isatty(STDERR_FILENO) != 0);
        if (!style) throw UsageError(std::string("--progress: unknown style '") + optarg + "'");
        request.progress = *style;
        break;
      }
      case opt_stats: request.stats = true; break;
      case opt_help:
      case 'h': copy_usage(); std::exit(exit_ok);
      case '?':
      default: {
        if (apply_endpoint_flag(c, optarg, request.endpoints)) break;
        std::string bad = argv[optind - 1] ? argv[optind - 1] : "?";
        throw UsageError("unknown or incomplete option '" + bad + "'");
      }
    }
  }
  if (argc - optind < 2) throw UsageError("copy needs a SOURCE and a DESTINATION");
  if (argc - optind > 2)
    throw UsageError(std::string("copy takes one SOURCE and one DESTINATION; unexpected argument '") +
                     argv[optind + 2] + "'");
  request.source = argv[optind];
  request.destination = argv[optind + 1];
  if (request.source.empty() || request.destination.empty())
    throw UsageError("SOURCE and DESTINATION must not be empty");
  return request;
}

}  // namespace

int copy_command(int argc, char** argv) {
  CopyRequest request = parse(argc, argv);
  // A malformed or unknown endpoint is the command line's mistake: said before either
  // end is opened, with exit status 2.
  if (Status ok = check_source(request.source, request.endpoints); !ok) throw UsageError(ok.error().message);
  if (Status ok = check_destination(request.destination, request.endpoints); !ok)
    throw UsageError(ok.error().message);
  check_tls_flags_used(request.endpoints, {request.source, request.destination});
  request.endpoints.notice = [](const std::string& note) {
    std::fprintf(stderr, "sluice: note: %s\n", printable(note).c_str());
  };

  asio::io_context context(1);
  ProgressReporter reporter(request.progress.value_or(ProgressStyle::none));
  ProgressUpdate last;
  request.copy.progress = [&](const ProgressUpdate& update) {
    last = update;
    reporter.update(update);
  };
  Transfer transfer(request.source, request.destination, request.endpoints, request.copy);

  // Ctrl-C or SIGTERM: stop the copy cleanly (every request accounted for), exit 1.
  // A second one is for when that wait is too long (a flush to a disk that has stopped
  // answering): leave at once. The destination is incomplete either way.
  auto leave_now = [] {
    std::fflush(stdout);
    std::fputs("sluice: interrupted again: exiting without waiting for the requests in flight\n", stderr);
    std::_Exit(exit_transfer_error);
  };
  StopSignals signals(context.get_executor(), [&] { transfer.cancel(); }, leave_now);

  std::optional<Result<TransferStats>> result;
  asio::co_spawn(context, transfer.run(), [&](std::exception_ptr error, Result<TransferStats> r) {
    result = error ? fail(std::errc::io_error, "internal error") : std::move(r);
    signals.finish();
  });
  context.run();
  // The outcome is decided: a signal from here on must not turn it into a death by
  // signal (asio puts back the default action when `signals` goes).
  hold_stop_signals();

  bool ok = result && result->has_value();
  if (ok) last = ProgressUpdate{(*result)->size, (*result)->size, (*result)->seconds};
  reporter.finish(last, ok);
  if (!ok) {
    std::fprintf(stderr, "sluice: %s\n",
                 printable(result ? result->error().message : "the transfer did not complete").c_str());
    return exit_transfer_error;
  }
  if (request.stats) {
    std::FILE* out = request.progress == ProgressStyle::xapi ? stderr : stdout;
    std::fprintf(out, "%s\n", stats_json(**result).c_str());
    if (std::fflush(out) != 0 || std::ferror(out))
      std::fputs("sluice: note: the copy succeeded; its --stats could not be written\n", stderr);
  }
  return exit_ok;
}

}  // namespace sluice::cli
