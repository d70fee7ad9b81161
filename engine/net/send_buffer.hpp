// A TCP socket's send buffer, fitted to the path it sends over.
//
// Linux grows a send buffer up to tcp_wmem's ceiling (4 MiB by default) while the
// congestion window allows. Over loopback and a short LAN hop that lets a sender run
// megabytes ahead of a receiver it shares the CPUs with: the bytes wait in the
// receiver's backlog, go cold in the caches, and both ends spend more CPU per byte.
// A buffer that covers the path's bandwidth-delay product, and little more, loses no
// throughput and keeps the two ends in step (docs/benchmarks.md, section "The send
// buffer"). Long paths keep the kernel's autotuning.
#pragma once

#include <chrono>
#include <cstddef>

namespace sluice {

struct SendBufferFit {
  // The buffer covers twice the bandwidth-delay product of a link this fast: about
  // what one TCP connection carries.
  static constexpr double link_bytes_per_second = 3.125e9;  // 25 Gbit/s
  // Never less: below it, loopback copies stalled on a full buffer (64 KiB was slower
  // than the kernel's own sizing).
  static constexpr std::size_t floor = 128u << 10;
};

// The SO_SNDBUF to ask for on a path with this least round trip, or 0 to leave the
// kernel's autotuning alone: when the round trip is not known, or when the buffer the
// kernel would keep for it (twice the size asked) would reach `ceiling`, tcp_wmem's
// maximum, anyway.
std::size_t fitted_send_buffer(std::chrono::microseconds least_round_trip, std::size_t ceiling);

// tcp_wmem's maximum, read once (4 MiB, Linux's default, if it cannot be read).
std::size_t tcp_send_buffer_ceiling();

// Fits a connected TCP socket's send buffer to its path (see above); returns the size
// asked for, 0 when the socket was left as it was (not TCP, long path, no sample).
std::size_t fit_send_buffer(int fd);

}  // namespace sluice
