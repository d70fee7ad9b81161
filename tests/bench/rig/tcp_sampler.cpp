// sluice-tcp-sampler: samples TCP_INFO of every TCP socket talking to one port, through
// the kernel's sock_diag interface, until SIGTERM/SIGINT; then prints one JSON object.
// Bench-only: built for tests/bench, never part of the product.
//
//   sluice-tcp-sampler --port PORT [--interval-us N] [--trace FILE]
//
// Runs in the client's network namespace and watches the client's sockets (those whose
// remote port is PORT), whatever program owns them: Sluice, nbdcopy, qemu-img. It
// reports, summed over those sockets, the data segments and bytes sent (tcpi_data_segs_out
// and tcpi_bytes_sent) and the share of the sockets' established time spent in a
// "sub-MSS stall".
//
// Final counters: besides the periodic dumps it subscribes to sock_diag's destroy
// notifications (SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY), which carry each
// TCP socket's TCP_INFO as it is freed (a closed socket turning into TIME_WAIT, or
// closing outright). A socket's counters are final when that notification arrived or
// the socket was still there at the last dump (taken at SIGTERM, after the client
// finished); "counters_final" says whether that held for every socket seen. Without
// the subscription (it needs CAP_NET_ADMIN) the figures are lower bounds: the last dump
// of an established socket can come before its last bytes.
//
// A sample of an established socket is a stall when the kernel holds queued data back
// although the peer's window is open (tcpi_notsent_bytes > 0, tcpi_snd_wnd >= MSS) and
// either nothing at all is in flight (tcpi_unacked == 0) or only a sub-MSS tail is queued
// while the congestion window has room (tcpi_notsent_bytes < tcpi_snd_mss, tcpi_unacked <
// tcpi_snd_cwnd). Both are what Nagle's algorithm does (Linux's Minshall variant holds a
// short segment while an earlier short one is unacknowledged, and data appended behind
// it waits too); a sender limited by the network instead has data in flight and a full
// window. Each sample stands for the time since the previous dump, so a late dump (the
// sampler did not get a CPU in time) weighs more, not the same as a punctual one; the
// share is stalled time over all sampled time of established sockets, idle time
// included, so it reads as "share of the connection's life spent held back".
//
// Sampling from outside costs two netlink dumps (IPv4, IPv6) per interval, default
// 1000 us. A dump walks the namespace's whole TCP established hash table, far slower in
// a namespace sharing the host's than in one with its own small table (see
// dumped_states; docs/benchmark-rig.md, section "The topology"), where 1 ms sampling
// is impossible. The interval is a target: the
// output has the number of dumps, the effective (mean) interval and the longest gap, and
// "undersampled" when the mean interval was more than twice the target. Run it with
// real-time priority (chrt -f 1) on a busy machine.

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
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
// The states dumped: every state of a full socket but LISTEN. Not TIME_WAIT (no
// TCP_INFO: its counters come with the destroy notification), NEW_SYN_RECV, nor the
// pseudo-state BOUND_INACTIVE (13), which makes the kernel walk the host's whole bind
// hash table on every dump. The established hash is walked anyway, which is why each
// namespace gets its own small table (net.ipv4.tcp_child_ehash_entries; run-matrix.sh
// sets that up; docs/benchmark-rig.md, section "The topology").
constexpr unsigned dumped_states = (1U << 1) | (1U << 2) | (1U << 3) | (1U << 4) | (1U << 5) | (1U << 7) |
                                   (1U << 8) | (1U << 9) | (1U << 11);

volatile sig_atomic_t stop_requested = 0;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "sluice-tcp-sampler: %s\n", message.c_str());
  std::exit(2);
}

std::int64_t now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

struct SocketSeen {
  std::uint64_t data_segs_out = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t retransmits = 0;
  std::uint32_t snd_mss = 0;
  bool final = false;         // counters from the destroy notification or the last dump
  std::uint64_t last_dump = 0;  // number of the last dump that listed it
};

struct Tally {
  std::uint64_t dumps = 0;
  std::uint64_t samples = 0;  // socket-samples of established sockets
  std::uint64_t stall_samples = 0;
  // Each established socket-sample weighted by the time since the previous dump.
  std::int64_t sampled_ns = 0, stall_ns = 0, queued_ns = 0;
  std::int64_t weight_ns = 0;  // of the dump being accounted
  std::int64_t first_dump_ns = 0, last_dump_ns = 0, max_gap_ns = 0;
  std::uint64_t destroy_events = 0;
  bool destroy_subscribed = false;
  bool destroy_lost = false;  // the kernel dropped notifications (ENOBUFS)
  std::map<std::pair<std::uint32_t, std::uint32_t>, SocketSeen> sockets;  // by diag cookie
};

// The kernel sits on queued data though the peer's window is open: either nothing is
// in flight at all, or only a sub-MSS tail waits while the congestion window has room.
// Nagle's algorithm (Linux's Minshall variant) and corking make both; a sender limited
// by the network has data in flight and a full congestion or receive window instead.
bool held_back(const tcp_info& info) {
  if (info.tcpi_notsent_bytes == 0 || info.tcpi_snd_wnd < info.tcpi_snd_mss) return false;
  if (info.tcpi_unacked == 0) return true;
  return info.tcpi_notsent_bytes < info.tcpi_snd_mss && info.tcpi_unacked < info.tcpi_snd_cwnd;
}

// The TCP_INFO of one sock_diag message, if it has one.
bool info_of(const nlmsghdr* header, tcp_info& info) {
  const auto* diag = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  int attributes_length = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof *diag));
  bool have_info = false;
  for (const auto* attribute = reinterpret_cast<const rtattr*>(diag + 1); RTA_OK(attribute, attributes_length);
       attribute = RTA_NEXT(attribute, attributes_length)) {
    if (attribute->rta_type != INET_DIAG_INFO) continue;
    info = tcp_info{};
    std::memcpy(&info, RTA_DATA(attribute), std::min<std::size_t>(RTA_PAYLOAD(attribute), sizeof info));
    have_info = true;
  }
  return have_info;
}

SocketSeen& remember(Tally& tally, const inet_diag_msg* diag, const tcp_info& info) {
  auto& seen = tally.sockets[{diag->id.idiag_cookie[0], diag->id.idiag_cookie[1]}];
  seen.data_segs_out = std::max<std::uint64_t>(seen.data_segs_out, info.tcpi_data_segs_out);
  seen.bytes_sent = std::max<std::uint64_t>(seen.bytes_sent, info.tcpi_bytes_sent);
  seen.retransmits = std::max<std::uint64_t>(seen.retransmits, info.tcpi_total_retrans);
  if (info.tcpi_snd_mss) seen.snd_mss = info.tcpi_snd_mss;
  return seen;
}

// Iterates the netlink messages of one datagram; NLMSG_OK/NLMSG_NEXT by hand: the
// macros compare signed with unsigned. f returns false to stop (NLMSG_DONE, errors).
template <typename F>
void each_message(const char* buffer, std::size_t length, F&& f) {
  for (std::size_t offset = 0; offset + sizeof(nlmsghdr) <= length;) {
    const auto* header = reinterpret_cast<const nlmsghdr*>(buffer + offset);
    if (header->nlmsg_len < sizeof(nlmsghdr) || offset + header->nlmsg_len > length) break;
    offset += NLMSG_ALIGN(header->nlmsg_len);
    if (!f(header)) return;
  }
}

class DiagSocket {
 public:
  explicit DiagSocket(unsigned groups = 0)
      : fd_(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) {
    if (fd_ < 0) die(std::string("netlink socket: ") + std::strerror(errno));
    if (groups) {
      int size = 1 << 20;  // room for a burst of notifications between two dumps
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
      sockaddr_nl local{};
      local.nl_family = AF_NETLINK;
      local.nl_groups = groups;
      subscribed_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0;
      if (!subscribed_)
        std::fprintf(stderr, "sluice-tcp-sampler: no sock_diag destroy notifications (%s): counters are lower bounds\n",
                     std::strerror(errno));
    }
  }
  ~DiagSocket() { ::close(fd_); }
  DiagSocket(const DiagSocket&) = delete;
  DiagSocket& operator=(const DiagSocket&) = delete;

  bool subscribed() const { return subscribed_; }
  int fd() const { return fd_; }

  // One dump of the TCP sockets in dumped_states (IPv4 and IPv6) with TCP_INFO.
  void sample(std::uint16_t port, Tally& tally) {
    std::int64_t now = now_ns();
    if (tally.dumps == 0) {
      tally.first_dump_ns = now;
      tally.weight_ns = 0;
    } else {
      tally.weight_ns = now - tally.last_dump_ns;
      tally.max_gap_ns = std::max(tally.max_gap_ns, tally.weight_ns);
    }
    tally.last_dump_ns = now;
    ++tally.dumps;
    for (std::uint8_t family : {std::uint8_t{AF_INET}, std::uint8_t{AF_INET6}}) dump(family, port, tally);
  }

  // Takes the destroy notifications waiting on this (subscribed) socket.
  void drain_destroyed(std::uint16_t port, Tally& tally) {
    for (;;) {
      ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == ENOBUFS) {
          tally.destroy_lost = true;
          continue;
        }
        return;  // EAGAIN: none left
      }
      each_message(buffer_, static_cast<std::size_t>(n), [&](const nlmsghdr* header) {
        if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) return true;
        const auto* diag = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
        tcp_info info{};
        if (ntohs(diag->id.idiag_dport) != port || !info_of(header, info)) return true;
        ++tally.destroy_events;
        remember(tally, diag, info).final = true;
        if (trace) trace_line("destroyed", diag, info);
        return true;
      });
    }
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
    message.request.idiag_states = dumped_states;
    message.request.idiag_ext = 1U << (INET_DIAG_INFO - 1);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd_, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
      die(std::string("sock_diag request: ") + std::strerror(errno));

    for (bool done = false; !done;) {
      ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(std::string("sock_diag reply: ") + std::strerror(errno));
      }
      each_message(buffer_, static_cast<std::size_t>(n), [&](const nlmsghdr* header) {
        // An address family the kernel lacks (no IPv6) is not an error for us.
        if (header->nlmsg_type == NLMSG_DONE || header->nlmsg_type == NLMSG_ERROR) {
          done = true;
          return false;
        }
        account(header, port, tally);
        return true;
      });
    }
  }

  void account(const nlmsghdr* header, std::uint16_t port, Tally& tally) {
    const auto* diag = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
    tcp_info info{};
    if (ntohs(diag->id.idiag_dport) != port || !info_of(header, info)) return;
    remember(tally, diag, info).last_dump = tally.dumps;
    if (trace) trace_line("state", diag, info);
    if (diag->idiag_state != tcp_established) return;
    ++tally.samples;
    tally.sampled_ns += tally.weight_ns;
    if (info.tcpi_notsent_bytes > 0) tally.queued_ns += tally.weight_ns;
    if (held_back(info)) {
      ++tally.stall_samples;
      tally.stall_ns += tally.weight_ns;
    }
  }

  void trace_line(const char* what, const inet_diag_msg* diag, const tcp_info& info) {
    std::int64_t now = now_ns();
    std::fprintf(trace,
                 "%lld.%06lld cookie=%08x %s=%u notsent=%u unacked=%u mss=%u bytes_sent=%llu bytes_acked=%llu "
                 "segs=%u cwnd=%u snd_wnd=%u last_send_ms=%u last_ack_recv_ms=%u rtt_us=%u ato_us=%u\n",
                 static_cast<long long>(now / 1'000'000'000), static_cast<long long>(now % 1'000'000'000 / 1000),
                 diag->id.idiag_cookie[0], what, diag->idiag_state, info.tcpi_notsent_bytes, info.tcpi_unacked,
                 info.tcpi_snd_mss, static_cast<unsigned long long>(info.tcpi_bytes_sent),
                 static_cast<unsigned long long>(info.tcpi_bytes_acked), info.tcpi_data_segs_out, info.tcpi_snd_cwnd,
                 info.tcpi_snd_wnd, info.tcpi_last_data_sent, info.tcpi_last_ack_recv, info.tcpi_rtt, info.tcpi_ato);
  }

  int fd_;
  bool subscribed_ = false;
  alignas(nlmsghdr) char buffer_[64 * 1024];
};

void print(Tally& tally, long interval_us) {
  std::uint64_t segments = 0, bytes = 0, retransmits = 0;
  std::uint32_t mss = 0;
  bool all_final = tally.destroy_subscribed && !tally.destroy_lost;
  for (auto& [cookie, seen] : tally.sockets) {
    // Still there at the last dump, taken once the client had finished: nothing
    // more will be sent on it.
    if (seen.last_dump == tally.dumps) seen.final = true;
    all_final = all_final && seen.final;
    segments += seen.data_segs_out;
    bytes += seen.bytes_sent;
    retransmits += seen.retransmits;
    mss = std::max(mss, seen.snd_mss);
  }
  auto share = [&](std::int64_t part) {
    return tally.sampled_ns ? static_cast<double>(part) / static_cast<double>(tally.sampled_ns) : 0.0;
  };
  double elapsed_us = static_cast<double>(tally.last_dump_ns - tally.first_dump_ns) / 1000.0;
  double effective_us = tally.dumps > 1 ? elapsed_us / static_cast<double>(tally.dumps - 1) : 0.0;
  bool undersampled = effective_us > 2.0 * static_cast<double>(interval_us);
  std::printf(
      "{\"interval_us\":%ld,\"dumps\":%llu,\"elapsed_us\":%.0f,\"effective_interval_us\":%.1f,"
      "\"max_gap_us\":%.0f,\"undersampled\":%s,\"sockets\":%zu,\"samples\":%llu,\"stall_samples\":%llu,"
      "\"sampled_s\":%.6f,\"stall_share\":%.4f,\"queued_share\":%.4f,\"data_segs_out\":%llu,\"bytes_sent\":%llu,"
      "\"bytes_per_segment\":%.1f,\"retransmits\":%llu,\"snd_mss\":%u,\"destroy_events\":%llu,"
      "\"counters_final\":%s}\n",
      interval_us, static_cast<unsigned long long>(tally.dumps), elapsed_us, effective_us,
      static_cast<double>(tally.max_gap_ns) / 1000.0, undersampled ? "true" : "false", tally.sockets.size(),
      static_cast<unsigned long long>(tally.samples), static_cast<unsigned long long>(tally.stall_samples),
      static_cast<double>(tally.sampled_ns) / 1e9, share(tally.stall_ns), share(tally.queued_ns),
      static_cast<unsigned long long>(segments), static_cast<unsigned long long>(bytes),
      segments ? static_cast<double>(bytes) / static_cast<double>(segments) : 0.0,
      static_cast<unsigned long long>(retransmits), mss, static_cast<unsigned long long>(tally.destroy_events),
      all_final ? "true" : "false");
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
  auto port16 = static_cast<std::uint16_t>(port);

  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  struct sigaction action {};
  action.sa_handler = [](int) { stop_requested = 1; };
  ::sigaction(SIGTERM, &action, nullptr);  // no SA_RESTART: the sleep ends at once
  ::sigaction(SIGINT, &action, nullptr);

  DiagSocket diag;
  DiagSocket destroyed((1U << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1U << (SKNLGRP_INET6_TCP_DESTROY - 1)));
  if (!trace_path.empty()) {
    diag.trace = destroyed.trace = std::fopen(trace_path.c_str(), "w");
    if (!diag.trace) die("cannot write " + trace_path);
  }
  Tally tally;
  tally.destroy_subscribed = destroyed.subscribed();
  // Whoever started us may now stop us: the handler is in place.
  std::fprintf(stderr, "sluice-tcp-sampler: sampling sockets to port %ld every %ld us\n", port, interval_us);
  timespec next{};
  ::clock_gettime(CLOCK_MONOTONIC, &next);
  while (!stop_requested) {
    diag.sample(port16, tally);
    if (tally.destroy_subscribed) destroyed.drain_destroyed(port16, tally);
    next.tv_nsec += interval_us * 1000;
    while (next.tv_nsec >= 1'000'000'000) {
      next.tv_nsec -= 1'000'000'000;
      ++next.tv_sec;
    }
    // A late dump is taken at once, and the schedule restarts from it: no burst of
    // back-to-back dumps to catch up (they would sample one moment many times). The
    // time it stands for is weighted in (see the header).
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) next = now;
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
  }
  // One last look: the sockets that are still there, then the destroy notifications of
  // those that went (the kernel sends them from a work queue: give it a moment).
  diag.sample(port16, tally);
  if (tally.destroy_subscribed) {
    pollfd fd{destroyed.fd(), POLLIN, 0};
    while (::poll(&fd, 1, 20) > 0) destroyed.drain_destroyed(port16, tally);
    destroyed.drain_destroyed(port16, tally);
  }
  print(tally, interval_us);
  if (diag.trace) std::fclose(diag.trace);
  return 0;
}

}  // namespace sluice::bench

int main(int argc, char** argv) { return sluice::bench::sampler_main(argc, argv); }
