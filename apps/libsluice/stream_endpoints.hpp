// Destinations that stream the image over a socket: tcp://, tls://, unix:// with the
// Chunked or raw protocol, and the xen-api import over http:// and https://.
#pragma once

#include <memory>
#include <string_view>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/destination.hpp"
#include "engine/uri.hpp"

namespace sluice {

bool is_stream_destination(const Uri& uri);

awaitable<Result<std::unique_ptr<Destination>>> open_stream_destination(const Uri& uri, std::uint64_t size,
                                                                        const EndpointOptions& options);

}  // namespace sluice
