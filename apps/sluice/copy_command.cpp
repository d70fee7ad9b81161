#include "apps/sluice/copy_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "apps/libsluice/sluice.hpp"
#include "apps/sluice/endpoint_flags.hpp"
#include "apps/sluice/option_table.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/progress_reporter.hpp"
#include "apps/sluice/stats_json.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"
#include "engine/stop_signals.hpp"

namespace sluice::cli {

namespace {

struct CopyRequest {
  std::string source;
  std::string destination;
  EndpointOptions endpoints;
  CopyOptions copy;
  std::optional<ProgressStyle> progress;
  bool stats = false;
};

// `sluice copy`'s options, filling `r`.
OptionTable copy_options(CopyRequest& r) {
  OptionTable table(
      "usage: sluice copy [options] SOURCE DESTINATION\n"
      "\n"
      "SOURCE and DESTINATION: a path or file:///path (regular file or block device), or an\n"
      "NBD export: nbd://H[:P]/EXPORT, nbds://... (TLS required), nbd+unix:///EXPORT?socket=PATH,\n"
      "nbds+unix://..., with ?tls-certificates=DIR, tls-psk-file=FILE, tls-hostname=NAME,\n"
      "tls-verify-peer=false. DESTINATION may also be null: (read the source, keep nothing).\n"
      "\n");
  CopyOptions& copy = r.copy;
  table.add({{"depth"}, Takes::value, "N",
             "requests in flight (default 8; more to an NBD server\n"
             "far away: two round trips at 10 Gbit/s, up to 64 MiB)",
             [&copy](const char* value) {
               copy.depth = static_cast<std::size_t>(count_between("depth", value, 1, 1024));
             }});
  table.add({{"request-size"}, Takes::value, "SIZE",
             "bytes per request, e.g. 256k, 2M (default 1M; 2M when\n"
             "the payload is spliced, never read by sluice)",
             [&copy](const char* value) {
               auto size = size_argument("request-size", value);
               if (size < 4096 || size > (32u << 20) || size % 4096 != 0)
                 throw UsageError("--request-size must be a multiple of 4k between 4k and 32M");
               copy.request_size = static_cast<std::size_t>(size);
             }});
  table.add({{"lanes"}, Takes::value, "N",
             "copy stripes of the image side by side, each on a thread\n"
             "of its own, sharing --depth (default: one per CPU, up to\n"
             "4, where both ends allow it: a local file to null:)",
             [&copy](const char* value) {
               copy.lanes = static_cast<std::size_t>(count_between("lanes", value, 1, 64));
             }});
  table.add({{"sparse"}, Takes::value, "=SIZE",
             "zero-detection granularity in read data; 0 turns it off\n"
             "(default 4k)",
             [&copy](const char* value) {
               auto size = size_argument("sparse", value);
               // Whole sectors: zero runs become requests that every destination can address.
               if (size != 0 && (size < 512 || size > (32u << 20) || size % 512 != 0))
                 throw UsageError("--sparse must be 0 (off) or a multiple of 512 from 512 to 32M");
               copy.sparse = static_cast<std::size_t>(size);
             }});
  table.add({{"prezeroed", "destination-is-zero", "target-is-zero"}, Takes::nothing, "",
             "the destination already reads as zeros: skip zero ranges",
             [&copy](const char*) { copy.destination_is_zero = true; }});
  table.add({{"allocated"}, Takes::nothing, "", "zeroed ranges stay allocated (no holes; NBD: NO_HOLE)",
             [&copy](const char*) { copy.allocated = true; }});
  table.add({{"direct"}, Takes::nothing, "", "O_DIRECT for local files (bypass the page cache)",
             [&r](const char*) { r.endpoints.file.direct = true; }});
  table.add({{"no-flush"}, Takes::nothing, "", "do not flush the destination at the end",
             [&copy](const char*) { copy.flush = false; }});
  table.add({{"no-zero-copy"}, Takes::nothing, "",
             "copy file data through memory even where it could be\n"
             "spliced (to a file, a plain Chunked/raw socket)",
             [&copy](const char*) { copy.zero_copy = ZeroCopy::never; }});
  table.add({{"zero-copy"}, Takes::nothing, "",
             "splice wherever possible, NBD destinations too (there\n"
             "buffered WRITEs measured faster, so not by default)",
             [&copy](const char*) { copy.zero_copy = ZeroCopy::always; }});
  table.add({{"progress"}, Takes::optional_value, "[=bar|json|xapi]",
             "bar (stderr, default on a terminal), json lines (stderr),\n"
             "or xen-api's 000..100 digits on stdout",
             [&r](const char* value) {
               auto style = parse_progress_style(value ? value : "", isatty(STDERR_FILENO) != 0);
               if (!style) throw UsageError(std::string("--progress: unknown style '") + value + "'");
               r.progress = *style;
             }});
  table.add({{"stats"}, Takes::nothing, "",
             "print a JSON summary at the end (stdout; stderr with\n"
             "--progress=xapi), with the copy's plan: request size,\n"
             "depth, lanes, buffers, zero-copy, zero detection",
             [&r](const char*) { r.stats = true; }});
  table.text("\nNetwork destinations: tcp://H:P, tls://H:P, unix:///PATH, http(s)://H[:P]/PATH?Q\n");
  table.add(endpoint_flags(r.endpoints));
  table.text(
      "\n"
      "SIGINT (Ctrl-C) or SIGTERM cancels the copy: no new request is issued, those\n"
      "in flight are waited for (up to --timeout, default 5 s; then they are cut off),\n"
      "an NBD destination gets a clean disconnect, and it exits 1. A second one exits 1\n"
      "at once, without waiting. A failed request stops the copy the same way.\n"
      "\n"
      "Exit status: 0 when every byte landed and was flushed, 1 on a transfer error,\n"
      "2 on a usage error (a malformed or unknown SOURCE or DESTINATION included).\n");
  return table;
}

CopyRequest parse(int argc, char** argv) {
  CopyRequest request;
  const std::vector<std::string> operands = copy_options(request).parse(argc, argv);
  // A peer given this long to answer is given as long to answer what is in flight
  // when the copy stops.
  if (request.endpoints.timeout.count() > 0) request.copy.stop_grace = request.endpoints.timeout;
  if (operands.size() < 2) throw UsageError("copy needs a SOURCE and a DESTINATION");
  if (operands.size() > 2)
    throw UsageError("copy takes one SOURCE and one DESTINATION; unexpected argument '" + operands[2] + "'");
  request.source = operands[0];
  request.destination = operands[1];
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

  // Ctrl-C or SIGTERM: stop the copy cleanly (every request accounted for, within the
  // grace period), exit 1. A second one is for when that wait is too long (a flush to
  // a disk that has stopped answering): leave at once. The destination is incomplete
  // either way.
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
