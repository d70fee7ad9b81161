#include "engine/net/tcp_info.hpp"

// linux/tcp.h, not netinet/tcp.h: glibc's copy of struct tcp_info lacks the newer
// fields (tcpi_min_rtt, Linux 4.10; tcpi_data_segs_out, Linux 4.6).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <optional>

namespace sluice {

namespace {

// The kernel fills as much of the struct as it knows: `len` says how much.
std::optional<struct tcp_info> read_tcp_info(int fd, std::size_t needed) {
  struct tcp_info info {};
  socklen_t len = sizeof info;
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  if (len < needed) return std::nullopt;
  return info;
}

}  // namespace

std::uint64_t tcp_data_segments_sent(int fd) {
  auto info = read_tcp_info(fd, offsetof(struct tcp_info, tcpi_data_segs_out) + sizeof(tcp_info::tcpi_data_segs_out));
  return info ? info->tcpi_data_segs_out : 0;
}

std::chrono::microseconds tcp_least_round_trip(int fd) {
  auto info = read_tcp_info(fd, offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(tcp_info::tcpi_min_rtt));
  // ~0u: no sample yet.
  if (!info || info->tcpi_min_rtt == ~0u) return std::chrono::microseconds{0};
  return std::chrono::microseconds{info->tcpi_min_rtt};
}

}  // namespace sluice
