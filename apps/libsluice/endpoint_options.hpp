// Everything that says how to open an endpoint, beyond its URI.
#pragma once

#include "storage/file_options.hpp"

namespace sluice {

struct EndpointOptions {
  FileOptions file;
};

}  // namespace sluice
