#include "engine/net/hard_close.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace sluice {

void hard_close(int fd) {
  if (fd < 0) return;
  struct linger immediate {};
  immediate.l_onoff = 1;
  immediate.l_linger = 0;
  // Not on a Unix socket (no such option there): ignoring the failure is right.
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &immediate, sizeof immediate);
  ::close(fd);
}

}  // namespace sluice
