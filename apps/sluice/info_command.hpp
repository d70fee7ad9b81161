#pragma once

namespace sluice::cli {

// sluice info [--json] SOURCE
int info_command(int argc, char** argv);

}  // namespace sluice::cli
