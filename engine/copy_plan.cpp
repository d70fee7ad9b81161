#include "engine/copy_plan.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "engine/copy_options.hpp"
#include "engine/destination.hpp"
#include "engine/source.hpp"

namespace sluice {

namespace {

// By reference where both ends allow it (and, unless asked for always, where the
// destination says it pays).
bool payload_by_reference(ZeroCopy zero_copy, const SourceTraits& source, const DestinationTraits& destination) {
  const bool wanted = zero_copy == ZeroCopy::always      ? destination.takes_file_slices
                      : zero_copy == ZeroCopy::automatic ? destination.file_slices_pay
                                                         : false;
  return wanted && source.gives_file_slices;
}

// Finding zeros in data pays only where zeros cost less than data. Where the payload
// goes by reference, they are found in a mapping of the source; with ZeroCopy::always
// there for good, with automatic until that proves dearer than reading into buffers.
ZeroScan zero_scan_for(const CopyOptions& options, const DestinationTraits& destination, bool known_zero,
                       bool by_reference) {
  const bool pays = !destination.ordered && !destination.discards && (destination.zero_is_cheap || known_zero);
  if (options.sparse == 0 || !pays) return ZeroScan::none;
  if (!by_reference) return ZeroScan::in_buffers;
  return options.zero_copy == ZeroCopy::automatic ? ZeroScan::in_place_until_dear : ZeroScan::in_place;
}

}  // namespace

std::string_view to_string(ZeroScan scan) {
  switch (scan) {
    case ZeroScan::none: return "none";
    case ZeroScan::in_buffers: return "in_buffers";
    case ZeroScan::in_place: return "in_place";
    case ZeroScan::in_place_until_dear: return "in_place_until_dear";
  }
  return "?";
}

Result<CopyPlan> plan_copy(const CopyOptions& options, const SourceTraits& source,
                           const DestinationTraits& destination, std::uint64_t image_size, std::size_t cpus,
                           std::size_t lane_loops) {
  CopyPlan plan;
  plan.by_reference = payload_by_reference(options.zero_copy, source, destination);
  auto sizes = settle_sizes(request_size_for(options.request_size, plan.by_reference), options.sparse,
                            source.block_sizes, destination.block_sizes);
  if (!sizes) return tl::unexpected(sizes.error());
  plan.request_size = sizes->request_size;
  plan.alignment = sizes->alignment;
  plan.round_trip = std::max(source.round_trip, destination.round_trip);
  const std::size_t depth = depth_for(options.depth, plan.request_size, plan.round_trip);

  // More than one lane only where both ends take them, and no more than the
  // destination has loops where it runs them on its own.
  const std::uint64_t stripe = stripe_size_for(options.stripe_size, plan.request_size, plan.alignment);
  std::size_t lanes = lanes_for(options.lanes, depth, stripe, image_size, cpus);
  if (!destination.takes_lanes || !source.serves_lanes) lanes = 1;
  if (lane_loops != 0) lanes = std::min(lanes, lane_loops);
  plan.lanes = lanes;
  plan.stripe_size = lanes > 1 ? stripe : 0;
  plan.lane_depth = depth / lanes;
  plan.depth = plan.lane_depth * lanes;

  plan.buffers = buffers_for(plan.lane_depth, destination.releases_buffers_when_sent, source.round_trip);
  plan.data_slots = destination.writes_in_flight > plan.lane_depth ? destination.writes_in_flight : 0;

  const bool known_zero = destination.known_zero || options.destination_is_zero;
  plan.zero_scan = zero_scan_for(options, destination, known_zero, plan.by_reference);
  plan.sparse = plan.zero_scan == ZeroScan::none ? 0 : sizes->sparse;
  const bool in_place = plan.zero_scan == ZeroScan::in_place || plan.zero_scan == ZeroScan::in_place_until_dear;
  plan.scan_slots = in_place ? plan.lane_depth : 0;
  plan.skip_zero_ranges = known_zero && !options.allocated;
  plan.ordered = destination.ordered;
  return plan;
}

std::size_t request_size_for(std::size_t asked, bool by_reference) {
  if (asked != 0) return asked;
  return by_reference ? CopyOptions::spliced_request_size : CopyOptions::buffered_request_size;
}

Result<SettledSizes> settle_sizes(std::size_t request_size, std::size_t sparse, const BlockSizes& source,
                                  const BlockSizes& destination) {
  const std::uint64_t minimum = std::max<std::uint64_t>({1, source.minimum, destination.minimum});
  const std::uint64_t maximum = std::min<std::uint64_t>(source.maximum, destination.maximum);
  if (!std::has_single_bit(minimum))
    return fail(std::errc::invalid_argument,
                "minimum block size " + std::to_string(minimum) + " is not a power of two");
  if (request_size == 0 || request_size % 4096 != 0)
    return fail(std::errc::invalid_argument, "request size must be a positive multiple of 4096");
  // A request as large as what either end prefers, never more than both accept.
  std::uint64_t request =
      std::max<std::uint64_t>({request_size, source.preferred, destination.preferred, minimum});
  if (request > maximum) request = std::bit_floor(maximum);
  request = request / minimum * minimum;
  // Under 4096 only when an end cannot take more (an NBD server's maximum payload):
  // slow, but the copy is still correct, and refusing it would leave no way to copy.
  if (request < minimum)
    return fail(std::errc::invalid_argument,
                "no request size fits both ends (minimum " + std::to_string(minimum) + ", maximum " +
                    std::to_string(maximum) + ")");
  SettledSizes settled;
  settled.request_size = static_cast<std::size_t>(request);
  settled.alignment = minimum;
  // Zero runs finer than what the destination can address could not be skipped.
  settled.sparse = sparse == 0 ? 0 : std::max<std::size_t>(sparse, static_cast<std::size_t>(minimum));
  return settled;
}

std::size_t depth_for(std::size_t asked, std::size_t request_size, std::chrono::microseconds round_trip) {
  if (asked != 0) return asked;
  const std::size_t request = std::max<std::size_t>(request_size, 1);
  const double in_flight = 2.0 * static_cast<double>(round_trip.count()) * 1e-6 *
                           CopyOptions::latency_link_bytes_per_second;
  const auto wanted = static_cast<std::size_t>(std::ceil(in_flight / static_cast<double>(request)));
  const std::size_t limit = std::max(CopyOptions::default_depth, CopyOptions::latency_in_flight_limit / request);
  return std::clamp(wanted, CopyOptions::default_depth, limit);
}

std::size_t buffers_for(std::size_t depth, bool releases_buffers_when_sent,
                        std::chrono::microseconds source_round_trip) {
  if (!releases_buffers_when_sent || source_round_trip.count() > 0) return depth;
  return std::min(depth, CopyOptions::local_read_ahead_buffers);
}

std::uint64_t stripe_size_for(std::uint64_t stripe_size, std::size_t request_size, std::uint64_t alignment) {
  auto round_up = [](std::uint64_t value, std::uint64_t unit) { return (value + unit - 1) / unit * unit; };
  const std::uint64_t whole_requests =
      round_up(std::max<std::uint64_t>(stripe_size, 1), std::max<std::uint64_t>(request_size, 1));
  return round_up(whole_requests, std::max<std::uint64_t>(alignment, 1));
}

std::size_t lanes_for(std::size_t asked, std::size_t depth, std::uint64_t stripe, std::uint64_t image_size,
                      std::size_t cpus) {
  const std::size_t wanted = asked != 0 ? asked : std::clamp<std::size_t>(cpus, 1, CopyOptions::max_automatic_lanes);
  const std::uint64_t stripes = (image_size + stripe - 1) / stripe;
  return static_cast<std::size_t>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>({wanted, std::max<std::size_t>(depth, 1), stripes})));
}

}  // namespace sluice
