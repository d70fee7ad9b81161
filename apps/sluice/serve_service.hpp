// A receiving service as `sluice serve` runs it: a handler for each connection and a
// way to ask the service to wind down (finish what is in flight, flush).
#pragma once

#include <functional>

#include "apps/sluice/serve_options.hpp"
#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/server_loop.hpp"

namespace sluice::cli {

struct ServeService {
  ConnectionHandler handler;
  std::function<void()> stop = [] {};
};

// --protocol chunked|raw (serve_stream.cpp)
Result<ServeService> make_stream_receiver(executor ex, const ServeOptions& options);

// --protocol nbd (serve_nbd.cpp)
Result<ServeService> make_nbd_service(executor ex, const ServeOptions& options);

}  // namespace sluice::cli
