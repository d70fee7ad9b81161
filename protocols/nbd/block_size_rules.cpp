#include "protocols/nbd/block_size_rules.hpp"

#include <algorithm>
#include <string>

namespace sluice::nbd {

namespace {

constexpr bool is_power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

tl::unexpected<Error> invalid(std::string message) {
  return fail(std::errc::invalid_argument, std::move(message));
}

std::string describe(const BlockSizes& s) {
  return "NBD block sizes " + std::to_string(s.minimum) + "/" + std::to_string(s.preferred) +
         "/" + std::to_string(s.maximum) + " (minimum/preferred/maximum)";
}

}  // namespace

Status validate_block_sizes(const BlockSizes& sizes) {
  if (!is_power_of_two(sizes.minimum) || sizes.minimum > 64 * 1024)
    return invalid(describe(sizes) + ": the minimum must be a power of 2 no larger than 65536");
  const std::uint32_t least_preferred = std::max<std::uint32_t>(sizes.minimum, 512);
  if (!is_power_of_two(sizes.preferred) || sizes.preferred < least_preferred)
    return invalid(describe(sizes) + ": the preferred size must be a power of 2 of at least " +
                   std::to_string(least_preferred));
  if (sizes.maximum == 0xffffffff) return {};
  if (sizes.maximum < sizes.preferred)
    return invalid(describe(sizes) + ": the maximum is smaller than the preferred size");
  if (sizes.maximum % sizes.minimum != 0)
    return invalid(describe(sizes) + ": the maximum is not a multiple of the minimum");
  return {};
}

Status check_request(Command command, std::uint64_t offset, std::uint32_t length,
                     const BlockSizes& sizes) {
  switch (command) {
    case Command::disc:
    case Command::flush: return {};
    default: break;
  }
  const std::uint32_t minimum = std::max<std::uint32_t>(sizes.minimum, 1);
  if (offset % minimum != 0 || length % minimum != 0)
    return invalid("NBD " + to_string(command) + " of " + std::to_string(length) +
                   " bytes at offset " + std::to_string(offset) +
                   " is not aligned to the minimum block size " + std::to_string(minimum));
  const bool moves_payload = command == Command::read || command == Command::write;
  if (moves_payload && length > sizes.maximum)
    return invalid("NBD " + to_string(command) + " of " + std::to_string(length) +
                   " bytes at offset " + std::to_string(offset) +
                   " exceeds the maximum payload of " + std::to_string(sizes.maximum) + " bytes");
  return {};
}

}  // namespace sluice::nbd
