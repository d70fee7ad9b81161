#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "engine/net/send_buffer.hpp"
#include "engine/net/tcp_info.hpp"
#include "engine/unique_fd.hpp"
#include "skip.hpp"

using namespace sluice;
using std::chrono::microseconds;

namespace {

constexpr std::size_t four_mib = 4u << 20;

int send_buffer_of(int fd) {
  int value = -1;
  socklen_t size = sizeof value;
  REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &size) == 0);
  return value;
}

// A TCP connection over loopback: the client end, the accepted end, and the listener.
struct LoopbackTcp {
  UniqueFd listener, client, server;
  LoopbackTcp() {
    listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(listener);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener.get(), 1) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    client = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(client);
    REQUIRE(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    server = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(server);
  }
};

}  // namespace

TEST_CASE("fitted_send_buffer: twice a 25 Gbit/s path's bandwidth-delay product, within the floor and the ceiling") {
  SUBCASE("no round trip known: the kernel's own sizing") { CHECK(fitted_send_buffer(microseconds{0}, four_mib) == 0); }
  SUBCASE("loopback's few microseconds: the floor") {
    CHECK(fitted_send_buffer(microseconds{1}, four_mib) == SendBufferFit::floor);
    CHECK(fitted_send_buffer(microseconds{15}, four_mib) == SendBufferFit::floor);
  }
  SUBCASE("a LAN hop") {
    CHECK(fitted_send_buffer(microseconds{30}, four_mib) == 187'500);
    CHECK(fitted_send_buffer(microseconds{100}, four_mib) == 625'000);
  }
  SUBCASE("a path long enough that the kernel's ceiling is the smaller: left alone") {
    // 2 x 335 us x 3.125 GB/s = 2,093,750 bytes; the kernel would keep twice that.
    CHECK(fitted_send_buffer(microseconds{335}, four_mib) == 2'093'750);
    CHECK(fitted_send_buffer(microseconds{336}, four_mib) == 0);
    CHECK(fitted_send_buffer(microseconds{20'000}, four_mib) == 0);
  }
  SUBCASE("a lower ceiling leaves more paths alone") {
    CHECK(fitted_send_buffer(microseconds{30}, 256u << 10) == 0);
    CHECK(fitted_send_buffer(microseconds{30}, 64u << 20) == 187'500);
  }
}

TEST_CASE("tcp_send_buffer_ceiling reads tcp_wmem's maximum") {
  CHECK(tcp_send_buffer_ceiling() >= SendBufferFit::floor);
}

TEST_CASE("tcp_least_round_trip: the handshake's sample on a connected socket, none before it") {
  UniqueFd unconnected(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(unconnected);
  CHECK(tcp_least_round_trip(unconnected.get()).count() == 0);
  LoopbackTcp tcp;
  CHECK(tcp_least_round_trip(tcp.client.get()).count() > 0);
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  UniqueFd a(fds[0]), b(fds[1]);
  CHECK(tcp_least_round_trip(a.get()).count() == 0);
}

TEST_CASE("fit_send_buffer sets a loopback connection's buffer to the fitted size" *
          doctest::test_suite("environment")) {
  LoopbackTcp tcp;
  const microseconds round_trip = tcp_least_round_trip(tcp.client.get());
  const std::size_t expected = fitted_send_buffer(round_trip, tcp_send_buffer_ceiling());
  // A loopback round trip takes microseconds; only a badly stalled host could take the
  // 335 us after which the kernel's sizing is kept.
  if (expected == 0) {
    test::skip_test("loopback round trip of " + std::to_string(round_trip.count()) + " us: too long to fit here");
    return;
  }
  const std::size_t asked = fit_send_buffer(tcp.client.get());
  CHECK(asked == expected);
  // Linux keeps twice what is asked.
  CHECK(send_buffer_of(tcp.client.get()) == static_cast<int>(2 * asked));
}

TEST_CASE("fit_send_buffer leaves a Unix socket alone") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  UniqueFd a(fds[0]), b(fds[1]);
  const int before = send_buffer_of(a.get());
  CHECK(fit_send_buffer(a.get()) == 0);
  CHECK(send_buffer_of(a.get()) == before);
}
