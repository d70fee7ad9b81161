// The command-line options that say how to reach an endpoint (protocol, TLS, Nagle,
// connections, timeout), shared by every command that opens one (copy, info), so
// `sluice info nbds://...` takes the same credentials as `sluice copy`.
#pragma once

#include <getopt.h>

#include <initializer_list>
#include <string_view>
#include <vector>

#include "apps/libsluice/endpoint_options.hpp"

namespace sluice::cli {

// Codes of these options in getopt_long; a command's own codes stay below.
constexpr int first_endpoint_flag = 1024;

// The getopt_long entries (not terminated: a command appends its own and the end).
const std::vector<struct option>& endpoint_flags();

// Applies option `code` with `argument`; false when the code is not one of these.
bool apply_endpoint_flag(int code, const char* argument, EndpointOptions& options);

// Refuses TLS options when no endpoint in `uris` uses TLS (UsageError): they would
// be ignored, and a user who gave --tls-ca to a tcp:// URI believes the link encrypted.
void check_tls_flags_used(const EndpointOptions& options, std::initializer_list<std::string_view> uris);

// The options' help text, one per line, indented like the commands' own.
extern const char* const endpoint_flags_help;

}  // namespace sluice::cli
