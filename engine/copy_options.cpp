#include "engine/copy_options.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

namespace sluice {

Status settle_sizes(CopyOptions& options, const BlockSizes& source, const BlockSizes& destination) {
  const std::uint64_t minimum = std::max<std::uint64_t>({1, source.minimum, destination.minimum});
  const std::uint64_t maximum = std::min<std::uint64_t>(source.maximum, destination.maximum);
  if (!std::has_single_bit(minimum))
    return fail(std::errc::invalid_argument,
                "minimum block size " + std::to_string(minimum) + " is not a power of two");
  if (options.request_size == 0 || options.request_size % 4096 != 0)
    return fail(std::errc::invalid_argument, "request size must be a positive multiple of 4096");
  // A request as large as what either end prefers, never more than both accept.
  std::uint64_t request = std::max<std::uint64_t>(
      {options.request_size, source.preferred, destination.preferred, minimum});
  if (request > maximum) request = std::bit_floor(maximum);
  request = request / minimum * minimum;
  // Under 4096 only when an end cannot take more (an NBD server's maximum payload):
  // slow, but the copy is still correct, and refusing it would leave no way to copy.
  if (request < minimum)
    return fail(std::errc::invalid_argument,
                "no request size fits both ends (minimum " + std::to_string(minimum) + ", maximum " +
                    std::to_string(maximum) + ")");
  options.request_size = static_cast<std::size_t>(request);
  options.alignment = minimum;
  if (options.sparse != 0) {
    // Zero runs finer than what the destination can address could not be skipped.
    options.sparse = std::max<std::size_t>(options.sparse, static_cast<std::size_t>(minimum));
  }
  return Status{};
}

std::size_t request_size_for(const CopyOptions& options, bool by_reference) {
  if (options.request_size != 0) return options.request_size;
  return by_reference ? CopyOptions::spliced_request_size : CopyOptions::buffered_request_size;
}

std::size_t depth_for(const CopyOptions& options, std::chrono::microseconds round_trip) {
  if (options.depth != 0) return options.depth;
  const std::size_t request = std::max<std::size_t>(options.request_size, 1);
  const double in_flight = 2.0 * static_cast<double>(round_trip.count()) * 1e-6 *
                           CopyOptions::latency_link_bytes_per_second;
  const auto wanted = static_cast<std::size_t>(std::ceil(in_flight / static_cast<double>(request)));
  const std::size_t limit = std::max(CopyOptions::default_depth, CopyOptions::latency_in_flight_limit / request);
  return std::clamp(wanted, CopyOptions::default_depth, limit);
}

std::uint64_t stripe_size_for(const CopyOptions& options) {
  auto round_up = [](std::uint64_t value, std::uint64_t unit) { return (value + unit - 1) / unit * unit; };
  const std::uint64_t whole_requests = round_up(std::max<std::uint64_t>(options.stripe_size, 1), std::max<std::uint64_t>(options.request_size, 1));
  return round_up(whole_requests, std::max<std::uint64_t>(options.alignment, 1));
}

std::size_t lanes_for(const CopyOptions& options, std::uint64_t image_size, std::size_t cpus) {
  const std::size_t wanted =
      options.lanes != 0 ? options.lanes : std::clamp<std::size_t>(cpus, 1, CopyOptions::max_automatic_lanes);
  const std::uint64_t stripe = stripe_size_for(options);
  const std::uint64_t stripes = (image_size + stripe - 1) / stripe;
  return static_cast<std::size_t>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>({wanted, std::max<std::size_t>(options.depth, 1), stripes})));
}

}  // namespace sluice
