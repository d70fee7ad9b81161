// Segments sent on a TCP socket, from the kernel's TCP_INFO (0 for non-TCP sockets).
#pragma once

#include <cstdint>

namespace sluice {

std::uint64_t tcp_data_segments_sent(int fd);

}  // namespace sluice
