#include "apps/sluice/stats_json.hpp"

#include "apps/sluice/json_writer.hpp"

namespace sluice::cli {

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
