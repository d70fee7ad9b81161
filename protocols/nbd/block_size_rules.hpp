// NBD block size constraints (proto.md "Block size constraints"): whether advertised
// sizes make sense, and whether a request obeys them.
#pragma once

#include <cstdint>

#include "engine/block_sizes.hpp"
#include "engine/error.hpp"
#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

// Sizes a peer may advertise in NBD_INFO_BLOCK_SIZE: the minimum a power of 2 no larger
// than 64 KiB; the preferred size a power of 2 of at least max(minimum, 512); the
// maximum payload 0xffffffff ("no limit") or a multiple of the minimum no smaller than
// the preferred size. The Error names the rule broken.
Status validate_block_sizes(const BlockSizes& sizes);

// Whether a request obeys `sizes`: offset and length are multiples of the minimum, and
// a READ or WRITE payload is no larger than the maximum (TRIM, WRITE_ZEROES, CACHE and
// BLOCK_STATUS move no payload, so only alignment applies; DISC and FLUSH carry no
// range). Fails with EINVAL and a sentence naming the command and the numbers, which is
// what a server answers.
Status check_request(Command command, std::uint64_t offset, std::uint32_t length,
                     const BlockSizes& sizes);

}  // namespace sluice::nbd
