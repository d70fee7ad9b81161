// NBD sources and destinations: nbd://, nbds://, nbd+unix://, nbds+unix://, and
// tcp:// / unix:// with --protocol nbd.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/destination.hpp"
#include "engine/net/stream.hpp"
#include "engine/source.hpp"
#include "engine/uri.hpp"

namespace sluice {

bool is_nbd_uri(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Source>>> open_nbd_source(const Uri& uri, const EndpointOptions& options);

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination(const Uri& uri, std::uint64_t size,
                                                                     const EndpointOptions& options);

// NBD on a connection that is already open and past any preamble: the xen-api import
// handshake answered `Transfer-Encoding: nbd`, so the NBD handshake (EXPORT_NAME
// `export_name`) follows on the same stream.
awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination_on_stream(std::unique_ptr<Stream> stream,
                                                                               std::string export_name,
                                                                               std::uint64_t size,
                                                                               const EndpointOptions& options);

}  // namespace sluice
