#pragma once

namespace sluice::cli {

// sluice demo: the README's first command. Generates a sparse image with scattered
// data, copies it through the engine, verifies the copy by SHA-256 and prints the
// throughput.
int demo_command(int argc, char** argv);

}  // namespace sluice::cli
