// A receiving service as `sluice serve` runs it: a handler for each connection, a way
// to ask the service to wind down (finish what is in flight, flush) and, where that can
// take as long as a whole image, a way to cut it short.
#pragma once

#include <functional>
#include <vector>

#include "apps/sluice/serve_options.hpp"
#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/server_loop.hpp"
#include "engine/unique_fd.hpp"

namespace sluice::cli {

struct ServeService {
  ConnectionHandler handler;
  std::function<void()> stop = [] {};
  // Cuts the transfers in flight (a second SIGTERM or SIGINT), each then failing as
  // incomplete; empty where stop() is already prompt (NBD requests are short).
  std::function<void()> abort;
};

// --protocol chunked|raw (serve_stream.cpp)
Result<ServeService> make_stream_receiver(executor ex, const ServeOptions& options);

// --protocol nbd (serve_nbd.cpp). The writable exports that are block devices are
// claimed (O_EXCL) once per server, for as long as the descriptors live, one per export
// (empty for the others); every loop's service shares them.
Result<std::vector<UniqueFd>> claim_export_devices(const ServeOptions& options);
Result<ServeService> make_nbd_service(executor ex, const ServeOptions& options,
                                      const std::vector<UniqueFd>& device_claims);

}  // namespace sluice::cli
