// Request size constraints an endpoint imposes (NBD block sizes, O_DIRECT alignment).
#pragma once

#include <cstdint>

namespace sluice {

struct BlockSizes {
  std::uint32_t minimum = 1;
  std::uint32_t preferred = 4096;
  std::uint32_t maximum = 32u << 20;
};

}  // namespace sluice
