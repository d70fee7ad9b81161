#include "engine/net/send_buffer.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "engine/net/tcp_info.hpp"

namespace sluice {

std::size_t fitted_send_buffer(std::chrono::microseconds least_round_trip, std::size_t ceiling) {
  if (least_round_trip.count() <= 0) return 0;
  const double product = static_cast<double>(least_round_trip.count()) * 1e-6 * SendBufferFit::link_bytes_per_second;
  const auto wanted = std::max(static_cast<std::size_t>(std::ceil(2.0 * product)), SendBufferFit::floor);
  // The kernel keeps twice what is asked (the rest pays for its bookkeeping), so a
  // buffer that would reach the ceiling is no smaller than autotuning's.
  if (2 * wanted >= ceiling) return 0;
  return wanted;
}

std::size_t tcp_send_buffer_ceiling() {
  static const std::size_t ceiling = [] {
    std::size_t least = 0, initial = 0, most = 0;
    std::ifstream in("/proc/sys/net/ipv4/tcp_wmem");
    if (in >> least >> initial >> most && most > 0) return most;
    return std::size_t{4u << 20};
  }();
  return ceiling;
}

std::size_t fit_send_buffer(int fd) {
  const std::size_t size = fitted_send_buffer(tcp_least_round_trip(fd), tcp_send_buffer_ceiling());
  if (size == 0) return 0;
  const int value = static_cast<int>(size);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof value) != 0) return 0;
  return size;
}

}  // namespace sluice
