// What the kernel's TCP_INFO says of a socket (zero for non-TCP sockets).
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice {

// Segments sent on a TCP socket.
std::uint64_t tcp_data_segments_sent(int fd);

// The least round trip the kernel has seen on a TCP socket (the handshake gives it a
// first sample); zero when unknown.
std::chrono::microseconds tcp_least_round_trip(int fd);

}  // namespace sluice
