#include "apps/libsluice/nbd_endpoints.hpp"

namespace sluice {

bool is_nbd_uri(const Uri& uri, const EndpointOptions& options) {
  return uri.scheme == "nbd" || uri.scheme == "nbds" || uri.scheme == "nbd+unix" || uri.scheme == "nbds+unix" ||
         ((uri.scheme == "tcp" || uri.scheme == "unix") && options.protocol == "nbd");
}

awaitable<Result<std::unique_ptr<Source>>> open_nbd_source(const Uri& uri, const EndpointOptions&) {
  co_return fail(std::errc::function_not_supported, uri.scheme + ": NBD is not implemented yet");
}

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination(const Uri& uri, std::uint64_t,
                                                                     const EndpointOptions&) {
  co_return fail(std::errc::function_not_supported, uri.scheme + ": NBD is not implemented yet");
}

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination_on_stream(std::unique_ptr<Stream>,
                                                                               std::string, std::uint64_t,
                                                                               const EndpointOptions&) {
  co_return fail(std::errc::function_not_supported,
                 "the server answered Transfer-Encoding: nbd; this build cannot speak NBD on an HTTP connection yet");
}

}  // namespace sluice
