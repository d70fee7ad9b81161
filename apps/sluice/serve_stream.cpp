#include "apps/sluice/serve_service.hpp"

namespace sluice::cli {

Result<ServeService> make_stream_receiver(executor, const ServeOptions& options) {
  return fail(std::errc::function_not_supported, "--protocol " + options.protocol + " is not implemented yet");
}

}  // namespace sluice::cli
