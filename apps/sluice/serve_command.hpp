#pragma once

namespace sluice::cli {

// sluice serve --listen URI --protocol chunked|raw|nbd ...
int serve_command(int argc, char** argv);

}  // namespace sluice::cli
