// NBD sources and destinations: nbd://, nbds://, nbd+unix://, nbds+unix://, and
// tcp:// / unix:// (plain) and tls:// (STARTTLS required) with --protocol nbd.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/net/stream.hpp"
#include "engine/source.hpp"
#include "engine/uri.hpp"

namespace sluice {

bool is_nbd_uri(const Uri& uri, const EndpointOptions& options);

// What opening checks before it connects: the URI names an export (host or socket,
// export name, TLS settings). A failure is the caller's mistake.
Status check_nbd_uri(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Source>>> open_nbd_source(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination(const Uri& uri, std::uint64_t size,
                                                                     const EndpointOptions& options);

// The NBD handshake on a stream that is already connected (the xen-api import answers
// "Transfer-Encoding: nbd" and the same socket then speaks NBD), then an NBD
// destination on it. A TLS stream counts as TLS: no STARTTLS is sent on it.
awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination_on_stream(std::unique_ptr<Stream> stream,
                                                                               std::string export_name,
                                                                               std::uint64_t size,
                                                                               const EndpointOptions& options);

}  // namespace sluice
