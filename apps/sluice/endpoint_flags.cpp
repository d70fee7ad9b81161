#include "apps/sluice/endpoint_flags.hpp"

#include <string>

#include "apps/libsluice/endpoints.hpp"
#include "apps/sluice/option_values.hpp"
#include "apps/sluice/usage_error.hpp"

namespace sluice::cli {

namespace {

enum Flag {
  flag_protocol = first_endpoint_flag,
  flag_tls_ca,
  flag_tls_cert,
  flag_tls_key,
  flag_tls_no_verify,
  flag_tls_hostname,
  flag_tls_psk_file,
  flag_tls_ciphers,
  flag_tls_ciphersuites,
  flag_tls12,
  flag_no_nodelay,
  flag_connections,
  flag_threads,
  flag_timeout,
  flag_connect_timeout,
  flag_source_format,
  flag_vhd_path,
};

}  // namespace

const char* const endpoint_flags_help =
    "  --protocol chunked|raw|nbd   framing on tcp://, tls://, unix:// (default chunked);\n"
    "                        with nbd they also work as sources (tls://: STARTTLS required)\n"
    "  --tls-ca FILE         trust these CAs (default: the system's)\n"
    "  --tls-cert FILE, --tls-key FILE   a client certificate\n"
    "  --tls-no-verify       do not verify the server's certificate or name\n"
    "  --tls-hostname NAME   the name to send (SNI) and verify\n"
    "  --tls-psk-file FILE   pre-shared keys, identity:hexkey lines\n"
    "  --tls-ciphers LIST, --tls-ciphersuites LIST, --tls12\n"
    "  --no-nodelay          leave Nagle's algorithm on (for comparisons)\n"
    "  --connections N       NBD connections when the server allows multi-conn\n"
    "                        (default: 2 where it does and the server is under\n"
    "                        0.5 ms away, else 1)\n"
    "  --threads N           event-loop threads the NBD connections run on, this\n"
    "                        one included (default: one per connection, up to the\n"
    "                        number of CPUs)\n"
    "  --timeout SECONDS     fail when a peer stops answering for this long: connecting,\n"
    "                        handshakes (NBD, TLS, HTTP), an NBD server with requests\n"
    "                        pending, a stream receiver that stops reading (default: no\n"
    "                        limit once data moves)\n"
    "  --connect-timeout SECONDS   connecting and the handshakes must finish within\n"
    "                        this (default 30; 0: only --timeout bounds them)\n"
    "  --source-format auto|raw|vhd   how a local source file is read (default auto:\n"
    "                        a VHD when its footer says so)\n"
    "  --vhd-path DIR        where a differencing VHD's parents are looked for after\n"
    "                        the child's directory (repeatable)\n";

const std::vector<struct option>& endpoint_flags() {
  static const std::vector<struct option> flags = {
      {"protocol", required_argument, nullptr, flag_protocol},
      {"tls-ca", required_argument, nullptr, flag_tls_ca},
      {"tls-cert", required_argument, nullptr, flag_tls_cert},
      {"tls-key", required_argument, nullptr, flag_tls_key},
      {"tls-no-verify", no_argument, nullptr, flag_tls_no_verify},
      {"tls-hostname", required_argument, nullptr, flag_tls_hostname},
      {"tls-psk-file", required_argument, nullptr, flag_tls_psk_file},
      {"tls-ciphers", required_argument, nullptr, flag_tls_ciphers},
      {"tls-ciphersuites", required_argument, nullptr, flag_tls_ciphersuites},
      {"tls12", no_argument, nullptr, flag_tls12},
      {"no-nodelay", no_argument, nullptr, flag_no_nodelay},
      {"connections", required_argument, nullptr, flag_connections},
      {"threads", required_argument, nullptr, flag_threads},
      {"timeout", required_argument, nullptr, flag_timeout},
      {"connect-timeout", required_argument, nullptr, flag_connect_timeout},
      {"source-format", required_argument, nullptr, flag_source_format},
      {"vhd-path", required_argument, nullptr, flag_vhd_path},
  };
  return flags;
}

bool apply_endpoint_flag(int code, const char* argument, EndpointOptions& options) {
  switch (code) {
    case flag_protocol: {
      std::string p = argument;
      if (p != "chunked" && p != "raw" && p != "nbd") throw UsageError("--protocol must be chunked, raw or nbd");
      options.protocol = p;
      return true;
    }
    case flag_tls_ca: options.tls.ca_file = argument; return true;
    case flag_tls_cert: options.tls.certificate = argument; return true;
    case flag_tls_key: options.tls.private_key = argument; return true;
    case flag_tls_no_verify: options.tls.verify_peer = false; return true;
    case flag_tls_hostname: options.tls.hostname = argument; return true;
    case flag_tls_psk_file: options.tls.psk_file = argument; return true;
    case flag_tls_ciphers: options.tls.ciphers = argument; return true;
    case flag_tls_ciphersuites: options.tls.ciphersuites = argument; return true;
    case flag_tls12: options.tls.tls12_only = true; return true;
    case flag_no_nodelay: options.stream.nodelay = false; return true;
    case flag_connections: {
      auto n = count_argument("connections", argument);
      if (n == 0 || n > 64) throw UsageError("--connections must be between 1 and 64");
      options.connections = static_cast<unsigned>(n);
      return true;
    }
    case flag_threads: {
      auto n = count_argument("threads", argument);
      if (n == 0 || n > 64) throw UsageError("--threads must be between 1 and 64");
      options.threads = static_cast<unsigned>(n);
      return true;
    }
    case flag_timeout: options.timeout = seconds_argument("timeout", argument); return true;
    case flag_connect_timeout:
      options.connect_timeout = seconds_argument("connect-timeout", argument);
      return true;
    case flag_source_format: {
      std::string f = argument;
      if (f == "auto") options.source_format = SourceFormat::automatic;
      else if (f == "raw") options.source_format = SourceFormat::raw;
      else if (f == "vhd") options.source_format = SourceFormat::vhd;
      else throw UsageError("--source-format must be auto, raw or vhd");
      return true;
    }
    case flag_vhd_path:
      if (*argument == '\0') throw UsageError("--vhd-path needs a directory");
      options.vhd_path.emplace_back(argument);
      return true;
    default: return false;
  }
}

void check_tls_flags_used(const EndpointOptions& options, std::initializer_list<std::string_view> uris) {
  if (options.tls == TlsOptions{}) return;
  for (std::string_view uri : uris)
    if (uses_tls(uri)) return;
  throw UsageError("the --tls-* options are for tls://, https://, nbds:// and nbds+unix:// endpoints; none is "
                   "given, so nothing would be encrypted");
}

}  // namespace sluice::cli
