// NBD sources and destinations: nbd://, nbds://, nbd+unix://, nbds+unix://, and
// tcp:// / unix:// with --protocol nbd.
#pragma once

#include <memory>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/destination.hpp"
#include "engine/source.hpp"
#include "engine/uri.hpp"

namespace sluice {

bool is_nbd_uri(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Source>>> open_nbd_source(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination(const Uri& uri, std::uint64_t size,
                                                                     const EndpointOptions& options);

}  // namespace sluice
