#include "apps/sluice/stats_json.hpp"

#include "apps/sluice/json_writer.hpp"

namespace sluice::cli {

namespace {

// How the copy was set up (engine/copy_plan.hpp), field by field.
std::string plan_json(const CopyPlan& p) {
  auto count = [](std::size_t n) { return static_cast<std::uint64_t>(n); };
  JsonObject json;
  json.add("request_size", count(p.request_size))
      .add("alignment", p.alignment)
      .add("depth", count(p.depth))
      .add("lanes", count(p.lanes))
      .add("stripe_size", p.stripe_size)
      .add("lane_depth", count(p.lane_depth))
      .add("buffers", count(p.buffers))
      .add("data_slots", count(p.data_slots))
      .add("scan_slots", count(p.scan_slots))
      .add("round_trip_us", static_cast<std::uint64_t>(p.round_trip.count()))
      .add("by_reference", p.by_reference)
      .add("zero_scan", to_string(p.zero_scan))
      .add("sparse", count(p.sparse))
      .add("skip_zero_ranges", p.skip_zero_ranges)
      .add("ordered", p.ordered);
  return json.str();
}

}  // namespace

std::string stats_json(const TransferStats& s) {
  JsonObject json;
  json.add("size", s.size)
      .add("bytes_read", s.bytes_read)
      .add("bytes_written", s.bytes_written)
      .add("bytes_zeroed", s.bytes_zeroed)
      .add("bytes_skipped", s.bytes_skipped)
      .add("data_extents", s.data_extents)
      .add("zero_extents", s.zero_extents)
      .add("hole_extents", s.hole_extents)
      .add("reads", s.reads)
      .add("writes", s.writes)
      .add("zero_requests", s.zero_requests)
      .add("zero_copy_writes", s.zero_copy_writes)
      .add("peak_buffers", s.peak_buffers)
      .add("depth", static_cast<std::uint64_t>(s.plan.depth))
      .add("request_size", static_cast<std::uint64_t>(s.plan.request_size))
      .add("round_trip_us", static_cast<std::uint64_t>(s.plan.round_trip.count()))
      .add("lanes", static_cast<std::uint64_t>(s.plan.lanes))
      .add("seconds", s.seconds)
      .add("mib_per_second",
           s.seconds > 0 ? static_cast<double>(s.size) / (1024.0 * 1024.0) / s.seconds : 0.0);
  json.add_raw("plan", plan_json(s.plan));
  if (s.mapped_scan_gave_way)
    json.add("mapped_scan_gave_way", true)
        .add("mapped_touch_ns_per_page", s.mapped_scan_gave_way->touch_ns_per_page)
        .add("mapped_copy_ns_per_page", s.mapped_scan_gave_way->copy_ns_per_page);
  if (s.socket_writes) json.add("socket_writes", *s.socket_writes);
  if (s.tls_records) json.add("tls_records", *s.tls_records);
  if (s.tls_cipher) json.add("tls_cipher", std::string_view(*s.tls_cipher));
  if (s.tcp_segments) json.add("tcp_segments", *s.tcp_segments);
  if (s.connections) json.add("connections", *s.connections);
  if (s.loops) json.add("loops", *s.loops);
  return json.str();
}

}  // namespace sluice::cli
