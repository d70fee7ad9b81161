#include "apps/libsluice/stream_endpoints.hpp"

namespace sluice {

bool is_stream_destination(const Uri& uri) {
  return uri.scheme == "tcp" || uri.scheme == "tls" || uri.scheme == "unix" || uri.scheme == "http" ||
         uri.scheme == "https";
}

awaitable<Result<std::unique_ptr<Destination>>> open_stream_destination(const Uri& uri, std::uint64_t,
                                                                        const EndpointOptions&) {
  co_return fail(std::errc::function_not_supported, uri.scheme + ": destinations are not implemented yet");
}

}  // namespace sluice
