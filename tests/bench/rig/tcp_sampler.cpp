// sluice-tcp-sampler: samples TCP_INFO of every TCP socket talking to one port, through
// the kernel's sock_diag interface, until SIGTERM/SIGINT; then prints one JSON object.
// Bench-only: built for tests/bench, never part of the product.
//
//   sluice-tcp-sampler --port PORT [--interval-us N] [--trace FILE]
//
// Runs in the client's network namespace and watches the client's sockets (those whose
// remote port is PORT), whatever program owns them: Sluice, nbdcopy, qemu-img. It
// reports, summed over those sockets, the data segments and bytes sent (tcpi_data_segs_out
// and tcpi_bytes_sent, as last seen: a socket's final counters are seen while it lingers
// in FIN_WAIT) and the share of samples in a "sub-MSS stall".
//
// A sample of an established socket is a stall when the kernel holds queued data back
// although the peer's window is open (tcpi_notsent_bytes > 0, tcpi_snd_wnd >= MSS) and
// either nothing at all is in flight (tcpi_unacked == 0) or only a sub-MSS tail is queued
// while the congestion window has room (tcpi_notsent_bytes < tcpi_snd_mss, tcpi_unacked <
// tcpi_snd_cwnd). Both are what Nagle's algorithm does (Linux's Minshall variant holds a
// short segment while an earlier short one is unacknowledged, and data appended behind
// it waits too); a sender limited by the network instead has data in flight and a full
// window. The share is stall samples over all samples of established sockets, idle
// ones included, so it reads as "share of the connection's life spent held back".
//
// Sampling a socket from outside costs one netlink dump (a few microseconds for the
// handful of sockets in a benchmark namespace) per interval; default 1000 us.

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::bench {

namespace {

// Linux's TCP states, as sock_diag numbers them (include/net/tcp_states.h).
constexpr unsigned tcp_established = 1;
constexpr unsigned tcp_time_wait = 6;
constexpr unsigned tcp_listen = 10;

volatile sig_atomic_t stop_requested = 0;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "sluice-tcp-sampler: %s\n", message.c_str());
  std::exit(2);
}

struct SocketSeen {
  std::uint64_t data_segs_out = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t retransmits = 0;
  std::uint32_t snd_mss = 0;
};

struct Tally {
  std::uint64_t dumps = 0;
  std::uint64_t samples = 0;  // socket-samples of established sockets
  std::uint64_t stall_samples = 0;
  std::uint64_t queued_samples = 0;  // any unsent bytes at all
  std::map<std::pair<std::uint32_t, std::uint32_t>, SocketSeen> sockets;  // by diag cookie
};

class DiagSocket {
 public:
  DiagSocket() : fd_(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) {
    if (fd_ < 0) die(std::string("netlink socket: ") + std::strerror(errno));
  }
  ~DiagSocket() { ::close(fd_); }
  DiagSocket(const DiagSocket&) = delete;
  DiagSocket& operator=(const DiagSocket&) = delete;

  // One dump of every non-listening TCP socket (IPv4 and IPv6) with TCP_INFO.
  void sample(std::uint16_t port, Tally& tally) {
    for (std::uint8_t family : {std::uint8_t{AF_INET}, std::uint8_t{AF_INET6}}) dump(family, port, tally);
    ++tally.dumps;
  }

  std::FILE* trace = nullptr;  // --trace: one line per socket-sample

 private:
  void dump(std::uint8_t family, std::uint16_t port, Tally& tally) {
    struct {
      nlmsghdr header;
      inet_diag_req_v2 request;
    } message{};
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.request.sdiag_family = family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U & ~(1U << tcp_listen) & ~(1U << tcp_time_wait);
    message.request.idiag_ext = 1U << (INET_DIAG_INFO - 1);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd_, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
      die(std::string("sock_diag request: ") + std::strerror(errno));

    for (;;) {
      ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(std::string("sock_diag reply: ") + std::strerror(errno));
      }
      // NLMSG_OK/NLMSG_NEXT by hand: the macros compare signed with unsigned.
      auto length = static_cast<std::size_t>(n);
      for (std::size_t offset = 0; offset + sizeof(nlmsghdr) <= length;) {
        const auto* header = reinterpret_cast<const nlmsghdr*>(buffer_ + offset);
        if (header->nlmsg_len < sizeof(nlmsghdr) || offset + header->nlmsg_len > length) break;
        offset += NLMSG_ALIGN(header->nlmsg_len);
        if (header->nlmsg_type == NLMSG_DONE) return;
        if (header->nlmsg_type == NLMSG_ERROR) {
          // An address family the kernel lacks (no IPv6) is not an error for us.
          return;
        }
        account(header, port, tally, trace);
      }
    }
  }

  // The kernel sits on queued data though the peer's window is open: either nothing is
  // in flight at all, or only a sub-MSS tail waits while the congestion window has room.
  // Nagle's algorithm (Linux's Minshall variant) and corking make both; a sender limited
  // by the network has data in flight and a full congestion or receive window instead.
  static bool held_back(const tcp_info& info) {
    if (info.tcpi_notsent_bytes == 0 || info.tcpi_snd_wnd < info.tcpi_snd_mss) return false;
    if (info.tcpi_unacked == 0) return true;
    return info.tcpi_notsent_bytes < info.tcpi_snd_mss && info.tcpi_unacked < info.tcpi_snd_cwnd;
  }

  static void account(const nlmsghdr* header, std::uint16_t port, Tally& tally, std::FILE* trace) {
    const auto* diag = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
    if (ntohs(diag->id.idiag_dport) != port) return;
    tcp_info info{};
    bool have_info = false;
    int attributes_length = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof *diag));
    for (const auto* attribute = reinterpret_cast<const rtattr*>(diag + 1); RTA_OK(attribute, attributes_length);
         attribute = RTA_NEXT(attribute, attributes_length)) {
      if (attribute->rta_type != INET_DIAG_INFO) continue;
      std::memcpy(&info, RTA_DATA(attribute), std::min<std::size_t>(RTA_PAYLOAD(attribute), sizeof info));
      have_info = true;
    }
    if (!have_info) return;
    auto& seen = tally.sockets[{diag->id.idiag_cookie[0], diag->id.idiag_cookie[1]}];
    seen.data_segs_out = std::max<std::uint64_t>(seen.data_segs_out, info.tcpi_data_segs_out);
    seen.bytes_sent = std::max<std::uint64_t>(seen.bytes_sent, info.tcpi_bytes_sent);
    seen.retransmits = std::max<std::uint64_t>(seen.retransmits, info.tcpi_total_retrans);
    if (info.tcpi_snd_mss) seen.snd_mss = info.tcpi_snd_mss;
    if (trace) {
      timespec now{};
      ::clock_gettime(CLOCK_MONOTONIC, &now);
      std::fprintf(trace,
                   "%lld.%06ld cookie=%08x state=%u notsent=%u unacked=%u mss=%u bytes_sent=%llu bytes_acked=%llu "
                   "cwnd=%u snd_wnd=%u last_send_ms=%u last_ack_recv_ms=%u rtt_us=%u ato_us=%u\n",
                   static_cast<long long>(now.tv_sec), now.tv_nsec / 1000, diag->id.idiag_cookie[0],
                   diag->idiag_state, info.tcpi_notsent_bytes, info.tcpi_unacked, info.tcpi_snd_mss,
                   static_cast<unsigned long long>(info.tcpi_bytes_sent),
                   static_cast<unsigned long long>(info.tcpi_bytes_acked), info.tcpi_snd_cwnd, info.tcpi_snd_wnd,
                   info.tcpi_last_data_sent, info.tcpi_last_ack_recv, info.tcpi_rtt, info.tcpi_ato);
    }
    if (diag->idiag_state != tcp_established) return;
    ++tally.samples;
    if (info.tcpi_notsent_bytes > 0) ++tally.queued_samples;
    if (held_back(info)) ++tally.stall_samples;
  }

  int fd_;
  alignas(nlmsghdr) char buffer_[64 * 1024];
};

void print(const Tally& tally, long interval_us) {
  std::uint64_t segments = 0, bytes = 0, retransmits = 0;
  std::uint32_t mss = 0;
  for (const auto& [cookie, seen] : tally.sockets) {
    segments += seen.data_segs_out;
    bytes += seen.bytes_sent;
    retransmits += seen.retransmits;
    mss = std::max(mss, seen.snd_mss);
  }
  auto share = [&](std::uint64_t part) {
    return tally.samples ? static_cast<double>(part) / static_cast<double>(tally.samples) : 0.0;
  };
  std::printf(
      "{\"interval_us\":%ld,\"dumps\":%llu,\"sockets\":%zu,\"samples\":%llu,\"stall_samples\":%llu,"
      "\"stall_share\":%.4f,\"queued_share\":%.4f,\"data_segs_out\":%llu,\"bytes_sent\":%llu,"
      "\"bytes_per_segment\":%.1f,\"retransmits\":%llu,\"snd_mss\":%u}\n",
      interval_us, static_cast<unsigned long long>(tally.dumps), tally.sockets.size(),
      static_cast<unsigned long long>(tally.samples), static_cast<unsigned long long>(tally.stall_samples),
      share(tally.stall_samples), share(tally.queued_samples), static_cast<unsigned long long>(segments),
      static_cast<unsigned long long>(bytes),
      segments ? static_cast<double>(bytes) / static_cast<double>(segments) : 0.0,
      static_cast<unsigned long long>(retransmits), mss);
  std::fflush(stdout);
}

}  // namespace

int sampler_main(int argc, char** argv) {
  long port = -1, interval_us = 1000;
  std::string trace_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--trace" && i + 1 < argc) {
      trace_path = argv[++i];
    } else if ((arg == "--port" || arg == "--interval-us") && i + 1 < argc) {
      char* end = nullptr;
      long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value <= 0) die(std::string(arg) + " needs a positive number");
      (arg == "--port" ? port : interval_us) = value;
    } else {
      std::fputs("usage: sluice-tcp-sampler --port PORT [--interval-us N] [--trace FILE]\n", stderr);
      return 2;
    }
  }
  if (port <= 0 || port > 65535) die("--port PORT is required");

  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  struct sigaction action {};
  action.sa_handler = [](int) { stop_requested = 1; };
  ::sigaction(SIGTERM, &action, nullptr);  // no SA_RESTART: the sleep ends at once
  ::sigaction(SIGINT, &action, nullptr);

  DiagSocket diag;
  if (!trace_path.empty()) {
    diag.trace = std::fopen(trace_path.c_str(), "w");
    if (!diag.trace) die("cannot write " + trace_path);
  }
  Tally tally;
  // Whoever started us may now stop us: the handler is in place.
  std::fprintf(stderr, "sluice-tcp-sampler: sampling sockets to port %ld every %ld us\n", port, interval_us);
  timespec next{};
  ::clock_gettime(CLOCK_MONOTONIC, &next);
  while (!stop_requested) {
    diag.sample(static_cast<std::uint16_t>(port), tally);
    next.tv_nsec += interval_us * 1000;
    while (next.tv_nsec >= 1'000'000'000) {
      next.tv_nsec -= 1'000'000'000;
      ++next.tv_sec;
    }
    // A late sample is taken at once; sampling never catches up with a burst.
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) next = now;
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
  }
  // One last look: the sockets' final counters, if they still exist.
  diag.sample(static_cast<std::uint16_t>(port), tally);
  print(tally, interval_us);
  if (diag.trace) std::fclose(diag.trace);
  return 0;
}

}  // namespace sluice::bench

int main(int argc, char** argv) { return sluice::bench::sampler_main(argc, argv); }
