#include "apps/sluice/endpoint_flags.hpp"

#include <string>

#include "apps/libsluice/endpoints.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/tls_flags.hpp"
#include "apps/sluice/usage_error.hpp"

namespace sluice::cli {

std::vector<OptionSpec> endpoint_flags(EndpointOptions& options) {
  std::vector<OptionSpec> flags = {
      {{"protocol"}, Takes::value, "chunked|raw|nbd",
       "framing on tcp://, tls://, unix:// (default chunked);\n"
       "with nbd they also work as sources (tls://: STARTTLS required)",
       [&options](const char* value) {
         std::string p = value;
         if (p != "chunked" && p != "raw" && p != "nbd") throw UsageError("--protocol must be chunked, raw or nbd");
         options.protocol = p;
       }},
  };
  for (OptionSpec& tls : tls_flags(options.tls, TlsSide::client)) flags.push_back(std::move(tls));
  std::vector<OptionSpec> rest = {
      {{"no-nodelay"}, Takes::nothing, "", "leave Nagle's algorithm on (for comparisons)",
       [&options](const char*) { options.stream.nodelay = false; }},
      {{"connections"}, Takes::value, "N",
       "NBD connections when the server allows multi-conn\n"
       "(default: 2 where it does and the server is under\n"
       "0.5 ms away, else 1)",
       [&options](const char* value) {
         options.connections = static_cast<unsigned>(count_between("connections", value, 1, 64));
       }},
      {{"threads"}, Takes::value, "N",
       "event-loop threads the NBD connections run on, this\n"
       "one included (default: one per connection, up to the\n"
       "number of CPUs)",
       [&options](const char* value) {
         options.threads = static_cast<unsigned>(count_between("threads", value, 1, 64));
       }},
      {{"timeout"}, Takes::value, "SECONDS",
       "fail when a peer stops answering for this long: connecting,\n"
       "handshakes (NBD, TLS, HTTP), an NBD server with requests\n"
       "pending, a stream receiver that stops reading (default: no\n"
       "limit once data moves)",
       [&options](const char* value) { options.timeout = seconds_argument("timeout", value); }},
      {{"connect-timeout"}, Takes::value, "SECONDS",
       "connecting and the handshakes must finish within\n"
       "this (default 30; 0: only --timeout bounds them)",
       [&options](const char* value) { options.connect_timeout = seconds_argument("connect-timeout", value); }},
      {{"source-format"}, Takes::value, "auto|raw|vhd",
       "how a local source file is read (default auto:\n"
       "a VHD when its footer says so)",
       [&options](const char* value) {
         const std::string f = value;
         if (f == "auto") options.source_format = SourceFormat::automatic;
         else if (f == "raw") options.source_format = SourceFormat::raw;
         else if (f == "vhd") options.source_format = SourceFormat::vhd;
         else throw UsageError("--source-format must be auto, raw or vhd");
       }},
      {{"vhd-path"}, Takes::value, "DIR",
       "where a differencing VHD's parents are looked for after\n"
       "the child's directory (repeatable)",
       [&options](const char* value) {
         if (*value == '\0') throw UsageError("--vhd-path needs a directory");
         options.vhd_path.emplace_back(value);
       }},
  };
  for (OptionSpec& flag : rest) flags.push_back(std::move(flag));
  return flags;
}

void check_tls_flags_used(const EndpointOptions& options, std::initializer_list<std::string_view> uris) {
  if (options.tls == TlsOptions{}) return;
  for (std::string_view uri : uris)
    if (uses_tls(uri)) return;
  throw UsageError("the --tls-* options are for tls://, https://, nbds:// and nbds+unix:// endpoints; none is "
                   "given, so nothing would be encrypted");
}

}  // namespace sluice::cli
