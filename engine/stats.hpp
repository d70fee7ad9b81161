// What a finished (or failed) transfer reports about itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/copy_plan.hpp"

namespace sluice {

struct TransferStats {
  std::uint64_t size = 0;           // virtual size of the source
  std::uint64_t bytes_read = 0;     // payload read from the source
  std::uint64_t bytes_written = 0;  // payload written to the destination
  std::uint64_t bytes_zeroed = 0;   // ranges the destination zeroed without payload
  std::uint64_t bytes_skipped = 0;  // zero ranges skipped (destination already zero)
  std::uint64_t data_extents = 0;   // source extents seen, by kind
  std::uint64_t zero_extents = 0;
  std::uint64_t hole_extents = 0;
  std::uint64_t reads = 0;  // requests issued to each side
  std::uint64_t writes = 0;
  std::uint64_t zero_requests = 0;
  std::uint64_t zero_copy_writes = 0;  // writes whose payload was spliced, never copied in
  std::uint64_t peak_buffers = 0;  // most pool blocks in use at once (lanes: the sum of their peaks)
  CopyPlan plan;  // what the copy was planned to be: depth, request size, lanes...
  double seconds = 0;

  // Transport figures, where the destination has a socket.
  std::optional<std::uint64_t> socket_writes;
  std::optional<std::uint64_t> tls_records;
  std::optional<std::uint64_t> tcp_segments;
  std::optional<std::uint64_t> connections;
  std::optional<std::uint64_t> loops;  // event-loop threads the connections ran on
  std::optional<std::string> tls_cipher;  // the suite the (first) TLS connection negotiated

  // Set when zero detection gave way from scanning the source in place to reading it
  // into buffers, because mapping a page cost more than copying it (MappedScanProbe):
  // the medians, in nanoseconds per 4 KiB page, the verdict was taken on.
  struct ScanGaveWay {
    double touch_ns_per_page = 0;
    double copy_ns_per_page = 0;
  };
  std::optional<ScanGaveWay> mapped_scan_gave_way;
};

}  // namespace sluice
