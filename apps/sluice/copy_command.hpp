#pragma once

namespace sluice::cli {

// sluice copy [options] SOURCE DESTINATION
int copy_command(int argc, char** argv);

}  // namespace sluice::cli
