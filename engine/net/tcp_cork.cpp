#include "engine/net/tcp_cork.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace sluice {

bool TcpCork::hold() {
  if (held_) return true;
  if (!works_) return false;
  int on = 1;
  works_ = ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
  held_ = works_;
  return held_;
}

void TcpCork::release() {
  if (!held_) return;
  int off = 0;
  // Cannot fail where setting it worked; were it to, the kernel's 200 ms limit still
  // lets the tail go.
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
  held_ = false;
}

}  // namespace sluice
