// What the handshake settled about one export on one connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/block_sizes.hpp"
#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

struct NegotiatedExport {
  std::string name;         // as the server names it (NBD_INFO_NAME), else as asked
  std::string description;  // NBD_INFO_DESCRIPTION, if sent
  std::uint64_t size = 0;
  std::uint16_t flags = 0;  // transmission_flag bits
  // The constraints to obey: the advertised ones, else what the spec tells a client to
  // assume (minimum 512, preferred 4096, maximum payload 32 MiB).
  BlockSizes block_sizes{512, 4096, 32u << 20};
  bool block_sizes_advertised = false;
  bool structured_replies = false;
  bool tls = false;
  // base:allocation's id, when the server agreed to it.
  std::optional<std::uint32_t> allocation_context;
  // GO was not understood and EXPORT_NAME ended the handshake.
  bool export_name_fallback = false;
  // The quickest option round trip of the handshake (send to first reply byte): the
  // link's latency as the copy will see it, server included. Zero when no option was
  // answered (oldstyle).
  std::chrono::microseconds round_trip{0};

  bool has(std::uint16_t flag) const { return (flags & flag) != 0; }
  bool read_only() const { return has(transmission_flag::read_only); }
  bool can_flush() const { return has(transmission_flag::send_flush); }
  bool can_write_zeroes() const { return has(transmission_flag::send_write_zeroes); }
  bool can_multi_conn() const { return has(transmission_flag::can_multi_conn); }
};

}  // namespace sluice::nbd
