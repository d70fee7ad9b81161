// Destinations that stream the image over a socket: tcp://, tls://, unix:// with the
// Chunked or raw protocol, and the xen-api import over http:// and https://.
#pragma once

#include <memory>
#include <string_view>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/uri.hpp"

namespace sluice {

bool is_stream_destination(const Uri& uri);

// What opening checks before it connects: a protocol this kind of stream carries, and
// an address (host and port, or a socket path). A failure is the caller's mistake.
Status check_stream_destination(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Destination>>> open_stream_destination(const Uri& uri, std::uint64_t size,
                                                                        const EndpointOptions& options);

}  // namespace sluice
