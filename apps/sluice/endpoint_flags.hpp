// The command-line options that say how to reach an endpoint (protocol, TLS, Nagle,
// connections, timeout), shared by every command that opens one (copy, info), so
// `sluice info nbds://...` takes the same credentials as `sluice copy`.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "apps/libsluice/endpoint_options.hpp"
#include "apps/sluice/option_table.hpp"

namespace sluice::cli {

// Options that fill `options`, which must outlive the parse.
std::vector<OptionSpec> endpoint_flags(EndpointOptions& options);

// Refuses TLS options when no endpoint in `uris` uses TLS (UsageError): they would
// be ignored, and a user who gave --tls-ca to a tcp:// URI believes the link encrypted.
void check_tls_flags_used(const EndpointOptions& options, std::initializer_list<std::string_view> uris);

}  // namespace sluice::cli
