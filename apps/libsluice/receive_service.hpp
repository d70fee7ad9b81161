// A receiving service as a Receiver runs it on one event loop: a handler for each
// connection, a way to ask the service to wind down (finish what is in flight, flush)
// and, where that can take as long as a whole image, a way to cut it short.
#pragma once

#include <functional>
#include <vector>

#include "apps/libsluice/receiver_options.hpp"
#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "engine/net/server_loop.hpp"
#include "engine/unique_fd.hpp"

namespace sluice {

struct ReceiveService {
  ConnectionHandler handler;
  // The handler runs a handshake and enters its gate once it is over (NBD); otherwise a
  // connection is served from the start.
  bool negotiates = false;
  // Turns away a client beyond --max-handshakes in the protocol's words (empty: a close).
  ConnectionRefuser refuse;
  std::function<void()> stop = [] {};
  // Cuts the transfers in flight, each then failing as incomplete; empty where stop()
  // is already prompt (NBD requests are short).
  std::function<void()> abort;
};

// protocol chunked|raw (stream_receive_service.cpp). `options` are checked and
// completed (Receiver::check).
Result<ReceiveService> make_stream_receive_service(executor ex, const ReceiverOptions& options);

// protocol nbd (nbd_export_service.cpp). The writable exports that are block devices are
// claimed (O_EXCL) once per receiver, for as long as the descriptors live, one per
// export (empty for the others); every loop's service shares them.
Result<std::vector<UniqueFd>> claim_export_devices(const ReceiverOptions& options);
Result<ReceiveService> make_nbd_export_service(executor ex, const ReceiverOptions& options,
                                               const std::vector<UniqueFd>& device_claims);

}  // namespace sluice
