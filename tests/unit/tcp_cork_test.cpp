#include <doctest/doctest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/net/tcp_cork.hpp"
#include "engine/unique_fd.hpp"

using namespace sluice;

namespace {

int cork_option(int fd) {
  int value = -1;
  socklen_t size = sizeof value;
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, &size) == 0);
  return value;
}

}  // namespace

TEST_CASE("TcpCork sets TCP_CORK once and clears it on release") {
  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(tcp);
  TcpCork cork(tcp.get());
  CHECK(cork_option(tcp.get()) == 0);
  CHECK(cork.hold());
  CHECK(cork.held());
  CHECK(cork_option(tcp.get()) == 1);
  CHECK(cork.hold());  // already held: still held, nothing else changes
  cork.release();
  CHECK_FALSE(cork.held());
  CHECK(cork_option(tcp.get()) == 0);
  cork.release();  // not held: nothing to do
  CHECK(cork_option(tcp.get()) == 0);
}

TEST_CASE("TcpCork on a Unix socket: no segments to hold, no error, not asked again") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  UniqueFd a(fds[0]), b(fds[1]);
  TcpCork cork(a.get());
  CHECK_FALSE(cork.hold());
  CHECK_FALSE(cork.held());
  CHECK_FALSE(cork.hold());
  cork.release();
}
