#include "engine/net/tcp_info.hpp"

// linux/tcp.h, not netinet/tcp.h: glibc's copy of struct tcp_info lacks the newer
// counters (tcpi_data_segs_out, Linux 4.6).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace sluice {

std::uint64_t tcp_data_segments_sent(int fd) {
  struct tcp_info info {};
  socklen_t len = sizeof info;
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  if (len < offsetof(struct tcp_info, tcpi_data_segs_out) + sizeof info.tcpi_data_segs_out) return 0;
  return info.tcpi_data_segs_out;
}

}  // namespace sluice
