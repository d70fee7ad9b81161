#include "apps/sluice/serve_service.hpp"

namespace sluice::cli {

Result<ServeService> make_nbd_service(executor, const ServeOptions&) {
  return fail(std::errc::function_not_supported, "--protocol nbd is not implemented yet");
}

}  // namespace sluice::cli
