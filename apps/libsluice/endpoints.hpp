// From a URI (or a plain path) to a Source or Destination of the right kind.
//
//   /path, file:///path     a raw image in a file or on a block device
//   null:                   (destination) discard everything
//   nbd://, nbds://, nbd+unix://, nbds+unix://     an NBD export (nbd_endpoints)
//   tcp://, tls://, unix://, http://, https://      (destination) a Chunked or raw
//                           stream, or the xen-api import (stream_endpoints)
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/asio.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/source.hpp"

namespace sluice {

// The checks the opens below make before they touch anything: the text names an
// endpoint of a kind this library can open, in that role, and is well formed. A failure
// here is the caller's mistake (a typo, a missing port), not the transfer's: the CLI
// reports it as a usage error before either end is opened.
Status check_source(std::string_view uri, const EndpointOptions& options);
Status check_destination(std::string_view uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Source>>> open_source(std::string_view uri,
                                                       const EndpointOptions& options);

// `size` is the source's size: the destination must hold that many bytes.
awaitable<Result<std::unique_ptr<Destination>>> open_destination(std::string_view uri,
                                                                 std::uint64_t size,
                                                                 const EndpointOptions& options);

// True when opening `uri` negotiates TLS (tls://, https://, nbds://, nbds+unix://):
// where the TLS options (EndpointOptions::tls) take effect.
bool uses_tls(std::string_view uri);

// For a local file endpoint, its path; empty for anything else.
std::string local_path(std::string_view uri);

}  // namespace sluice
