// What a stream destination adds to a transfer's statistics: the socket's writes,
// TLS records and TCP segments, as --stats reports them.
#pragma once

#include "engine/net/stream.hpp"
#include "engine/stats.hpp"

namespace sluice {

inline void add_stream_stats(const StreamStats& stream, bool tls, TransferStats& stats) {
  stats.socket_writes = stats.socket_writes.value_or(0) + stream.socket_writes;
  if (tls) stats.tls_records = stats.tls_records.value_or(0) + stream.tls_records;
  if (!stats.tls_cipher && !stream.tls_cipher.empty()) stats.tls_cipher = stream.tls_cipher;
  // 0 means TCP_INFO had nothing to say (a Unix socket).
  if (stream.tcp_segments > 0) stats.tcp_segments = stats.tcp_segments.value_or(0) + stream.tcp_segments;
  stats.connections = stats.connections.value_or(0) + 1;
}

}  // namespace sluice
