// sluice-delay-relay: a TCP relay that holds each direction's bytes for RTT/2 before
// passing them on, so the two endpoints see an emulated round-trip time at the
// application level. Bench-only: built for tests/bench, never part of the product.
//
// Why it exists: the benchmark machine's kernel has no netem, so the only way to put a
// 0.2..20 ms round trip between an NBD client and its server is to sit in the middle.
// What it does NOT reproduce (docs/benchmark-rig.md has the long form): the TCP
// handshake, ACK clocking, delayed ACKs and congestion-window growth stay those of the
// two short connections (endpoint <-> relay); only the bytes are late, not the ACKs.
//
//   sluice-delay-relay --listen HOST:PORT --connect HOST:PORT --rtt MS
//                      [--buffer BYTES] [--ready-file PATH] [--once] [--quiet]
//
// PORT 0 in --listen picks a free port; --ready-file receives "PORT PID" once the
// relay listens.
//
// Each accepted connection gets a fresh upstream connection and two forwarding threads
// (one per direction). Bytes are timestamped when a read() returns them and written
// no earlier than that time plus RTT/2, in order; nothing is dropped, merged or
// reordered. The stream's end travels the same way: a FIN is passed on as a half-close
// RTT/2 after it arrived (and after the bytes before it), a reset as a reset (an
// abortive close) RTT/2 after it arrived. A direction holds at most --buffer bytes
// (default 64 MiB): that is the window the emulated path can keep in flight, so it must
// exceed rate x RTT/2.

//
// On SIGTERM or SIGINT (or after the first connection with --once) it prints one JSON
// object with totals and the release lateness, then exits 0.

#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sluice::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct HostPort {
  std::string host;
  std::string port;
};

struct Options {
  HostPort listen;
  HostPort connect;
  double rtt_ms = 0;
  std::size_t buffer = std::size_t{64} << 20;
  std::string ready_file;
  bool once = false;
  bool quiet = false;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "sluice-delay-relay: %s\n", message.c_str());
  std::exit(2);
}

[[noreturn]] void die_errno(const std::string& what) { die(what + ": " + std::strerror(errno)); }

HostPort parse_host_port(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    die("expected HOST:PORT, got '" + std::string(text) + "'");
  return {std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
}

std::size_t parse_bytes(std::string_view text) {
  char* end = nullptr;
  std::string copy(text);
  unsigned long long value = std::strtoull(copy.c_str(), &end, 10);
  std::string_view suffix(end);
  if (end == copy.c_str()) die("not a size: '" + copy + "'");
  if (suffix == "k" || suffix == "K") value <<= 10;
  else if (suffix == "m" || suffix == "M") value <<= 20;
  else if (suffix == "g" || suffix == "G") value <<= 30;
  else if (!suffix.empty()) die("not a size: '" + copy + "'");
  return static_cast<std::size_t>(value);
}

void usage(std::FILE* out) {
  std::fputs(
      "usage: sluice-delay-relay --listen HOST:PORT --connect HOST:PORT --rtt MS\n"
      "                          [--buffer BYTES] [--ready-file PATH] [--once] [--quiet]\n"
      "\n"
      "Relays TCP connections, holding each direction's bytes for RTT/2: an\n"
      "application-level RTT emulation (TCP ACKs between each endpoint and the relay are\n"
      "not delayed). Prints a JSON summary on SIGTERM/SIGINT or, with --once, after the\n"
      "first connection.\n",
      out);
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool have_listen = false, have_connect = false, have_rtt = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) die(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--listen") {
      o.listen = parse_host_port(value());
      have_listen = true;
    } else if (arg == "--connect") {
      o.connect = parse_host_port(value());
      have_connect = true;
    } else if (arg == "--rtt") {
      std::string text(value());
      char* end = nullptr;
      o.rtt_ms = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(o.rtt_ms >= 0) || o.rtt_ms > 60'000)
        die("--rtt takes milliseconds between 0 and 60000, got '" + text + "'");
      have_rtt = true;
    } else if (arg == "--buffer") {
      o.buffer = parse_bytes(value());
      if (o.buffer < 65536) die("--buffer must be at least 64k");
    } else if (arg == "--ready-file") {
      o.ready_file = value();
    } else if (arg == "--once") {
      o.once = true;
    } else if (arg == "--quiet") {
      o.quiet = true;

    } else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      usage(stderr);
      std::exit(2);
    }
  }
  if (!have_listen || !have_connect || !have_rtt) {
    usage(stderr);
    std::exit(2);
  }
  return o;
}

// --- statistics ------------------------------------------------------------------

// How late bytes left the relay, counted per release in power-of-two microsecond
// buckets: bucket 0 is < 1 us, bucket k is [2^(k-1), 2^k) us. Releases that found
// earlier bytes still unwritten (the receiver was slower) are only counted.
struct DirectionStats {
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> releases{0};
  std::atomic<std::uint64_t> backlogged{0};
  std::atomic<std::uint64_t> max_held{0};  // most bytes held at once
  std::atomic<std::uint64_t> max_late_ns{0};
  std::array<std::atomic<std::uint64_t>, 40> late_buckets{};

  void record_release(Clock::duration late) {
    auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, std::chrono::nanoseconds(late).count()));
    std::uint64_t us = ns / 1000;
    std::size_t bucket = 0;
    while (us > 0 && bucket + 1 < late_buckets.size()) {
      us >>= 1;
      ++bucket;
    }
    late_buckets[bucket].fetch_add(1, std::memory_order_relaxed);
    releases.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t seen = max_late_ns.load(std::memory_order_relaxed);
    while (ns > seen && !max_late_ns.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }

  void record_held(std::uint64_t held) {
    std::uint64_t seen = max_held.load(std::memory_order_relaxed);
    while (held > seen && !max_held.compare_exchange_weak(seen, held, std::memory_order_relaxed)) {
    }
  }

  // Upper bound, in microseconds, of the bucket holding quantile q of the releases.
  double late_quantile_us(double q) const {
    std::uint64_t total = releases.load(std::memory_order_relaxed);
    if (total == 0) return 0;
    auto wanted = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
    std::uint64_t seen = 0;
    for (std::size_t k = 0; k < late_buckets.size(); ++k) {
      seen += late_buckets[k].load(std::memory_order_relaxed);
      if (seen >= wanted) return k == 0 ? 1.0 : std::ldexp(1.0, static_cast<int>(k));
    }
    return std::ldexp(1.0, static_cast<int>(late_buckets.size()));
  }

  void add_to(DirectionStats& total) const {
    total.bytes += bytes.load();
    total.releases += releases.load();
    total.backlogged += backlogged.load();
    total.record_held(max_held.load());
    std::uint64_t late = max_late_ns.load();
    std::uint64_t seen = total.max_late_ns.load();
    if (late > seen) total.max_late_ns = late;
    for (std::size_t k = 0; k < late_buckets.size(); ++k) total.late_buckets[k] += late_buckets[k].load();
  }
};

struct Totals {
  std::mutex mutex;
  std::uint64_t connections = 0;
  std::uint64_t failed = 0;

  // Live connections stay listed so a summary printed mid-connection still counts them.
  std::vector<std::shared_ptr<std::array<DirectionStats, 2>>> all;
};

Totals totals;

// --- sockets -----------------------------------------------------------------------

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) die_errno("fcntl");
}

addrinfo* resolve(const HostPort& where, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &result);
  if (rc != 0) die("cannot resolve " + where.host + ":" + where.port + ": " + ::gai_strerror(rc));
  return result;
}

int listen_on(const HostPort& where) {
  addrinfo* list = resolve(where, true);
  int fd = -1;
  for (addrinfo* a = list; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(list);
  if (fd < 0) die_errno("cannot listen on " + where.host + ":" + where.port);
  return fd;
}

// Blocking connect; -1 (errno set) when no address answers.
int connect_to(const HostPort& where) {
  addrinfo* list = resolve(where, false);
  int fd = -1;
  for (addrinfo* a = list; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    int saved = errno;
    ::close(fd);
    errno = saved;
    fd = -1;
  }
  ::freeaddrinfo(list);
  return fd;
}

// --- one direction -----------------------------------------------------------------

// Where held bytes wait: a ring, recv() in and sendmsg() out. (splice() through a pipe
// would save the two copies, but a pipe beyond pipe-max-size, 1 MiB, needs
// CAP_SYS_RESOURCE, and in a loopback iperf3 comparison it was not measurably faster:
// most of the relay's cost is the second TCP hop, not the copies.)
class Ring {
 public:
  explicit Ring(std::size_t capacity) : capacity_(capacity), ring_(new char[capacity]) {}

  // Takes up to `limit` bytes from `from`: > 0 bytes, 0 at EOF, -1 with errno.
  ssize_t fill(int from, std::size_t limit) {
    std::size_t head = static_cast<std::size_t>(in_ % capacity_);
    std::size_t room = std::min({capacity_ - head, static_cast<std::size_t>(capacity_ - (in_ - out_)), limit});
    ssize_t n = ::recv(from, ring_.get() + head, room, MSG_DONTWAIT);
    if (n > 0) in_ += static_cast<std::uint64_t>(n);
    return n;
  }

  // Sends the oldest `count` held bytes (or fewer) to `to`, like fill.
  ssize_t drain(int to, std::size_t count) {
    std::size_t head = static_cast<std::size_t>(out_ % capacity_);
    iovec parts[2];
    parts[0] = {ring_.get() + head, std::min(count, capacity_ - head)};
    parts[1] = {ring_.get(), count - parts[0].iov_len};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = parts[1].iov_len ? 2 : 1;
    ssize_t n = ::sendmsg(to, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) out_ += static_cast<std::uint64_t>(n);
    return n;
  }

 private:
  std::size_t capacity_;
  // Only the pages actually used get touched: a 64 MiB ring costs what the path holds.
  std::unique_ptr<char[]> ring_;
  std::uint64_t in_ = 0, out_ = 0;
};

// How one direction ended.
enum class End {
  eof,        // the sender's FIN, passed on (half-close) RTT/2 after it came, behind every byte
  reset,      // the sender's reset (or a read error), passed on as a reset RTT/2 after it came
  peer_gone,  // the receiver refused bytes (it reset or closed): they cannot be delivered
  torn_down,  // the other direction reset this one's sender: nothing more to do
};

// What the two directions of one connection share.
struct Link {
  std::atomic<bool> reset_sent{false};  // a direction has reset its receiver
};

// An abortive close without close(): the other direction's thread still uses the
// descriptor. connect(AF_UNSPEC) runs tcp_disconnect, which sends a RST from any
// synchronised state and wakes that thread with ECONNRESET.
void send_reset(int fd) {
  linger abort{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  sockaddr unspecified{};
  unspecified.sa_family = AF_UNSPEC;
  ::connect(fd, &unspecified, sizeof unspecified);
}

// Moves bytes from `from` to `to`; each byte leaves no earlier than `hold` after the
// read that brought it in. The end of the stream is a mark in the same queue, due
// `hold` after it was read, like the bytes: a FIN is passed on (shutdown(SHUT_WR)) once
// it is due and every byte before it is written; a reset (or any read error) is passed
// on as a reset once it is due, after one last write of whatever the receiver takes
// then (bytes a reset overtakes are lost, as on a real link).
End forward(int from, int to, Clock::duration hold, std::size_t capacity, DirectionStats& stats, Link& link) {
  Ring ring(capacity);
  enum class Kind { data, eof, reset };
  struct Mark {
    Clock::time_point due;
    std::uint64_t end;  // stream offset just past the bytes of this read
    Kind kind;
  };
  std::deque<Mark> marks;
  std::uint64_t read_total = 0, written_total = 0, releasable = 0;
  bool reading = true;
  constexpr std::size_t max_read = std::size_t{1} << 20;
  auto refused = [&] { return link.reset_sent.load() ? End::torn_down : End::peer_gone; };

  for (;;) {
    auto now = Clock::now();
    while (!marks.empty() && marks.front().kind == Kind::data && marks.front().due <= now) {
      // Bytes queued behind unwritten ones wait for the receiver, not for the relay's
      // timer: only releases into an idle direction measure how punctual the relay is.
      if (releasable == written_total)
        stats.record_release(now - marks.front().due);
      else
        stats.backlogged.fetch_add(1, std::memory_order_relaxed);
      releasable = marks.front().end;
      marks.pop_front();
    }
    if (!marks.empty() && marks.front().kind == Kind::reset && marks.front().due <= now) {
      if (releasable > written_total) ring.drain(to, static_cast<std::size_t>(releasable - written_total));
      link.reset_sent = true;  // before the reset: the other direction's read error is ours
      send_reset(to);
      return End::reset;
    }
    if (!marks.empty() && marks.front().kind == Kind::eof && marks.front().due <= now && written_total == releasable) {
      ::shutdown(to, SHUT_WR);
      return End::eof;
    }

    bool moved = false, write_blocked = false, read_blocked = false;

    if (releasable > written_total) {
      ssize_t n = ring.drain(to, static_cast<std::size_t>(releasable - written_total));
      if (n > 0) {
        written_total += static_cast<std::uint64_t>(n);
        stats.bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        moved = true;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        write_blocked = true;
      } else if (n < 0 && errno != EINTR) {
        return refused();
      }
    }

    std::uint64_t held = read_total - written_total;
    if (reading && held < capacity) {
      ssize_t n = ring.fill(from, std::min(max_read, static_cast<std::size_t>(capacity - held)));
      if (n > 0) {
        read_total += static_cast<std::uint64_t>(n);
        marks.push_back({Clock::now() + hold, read_total, Kind::data});
        stats.record_held(read_total - written_total);
        moved = true;
      } else if (n == 0) {
        marks.push_back({Clock::now() + hold, read_total, Kind::eof});
        reading = false;
        moved = true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        read_blocked = true;
      } else if (errno != EINTR) {
        if (link.reset_sent) return End::torn_down;
        marks.push_back({Clock::now() + hold, read_total, Kind::reset});
        reading = false;
        moved = true;
      }
    }
    if (moved) continue;

    // Nothing moved: sleep until a socket is ready or the next mark falls due (at once
    // if it fell due meanwhile). A due FIN waits only for the receiver to take the bytes
    // before it (POLLOUT); it has no time of its own left to wait for.
    pollfd fds[2] = {{read_blocked ? from : -1, POLLIN, 0}, {write_blocked ? to : -1, POLLOUT, 0}};
    timespec timeout{};
    // Wake at the next due time even while blocked on a write, so that release is
    // seen (and counted as backlogged) when it happens.
    bool fin_waits_for_writes = !marks.empty() && marks.front().kind == Kind::eof && marks.front().due <= Clock::now();
    // Never asleep for long without a look around: a wake-up missed by a case the loop
    // did not foresee then costs 100 ms, not the run (a bulk echo under ASan once sat
    // 60 s with nothing moving in CI; not reproduced in 27 runs since).
    std::int64_t ns = 100'000'000;
    if (!marks.empty() && !fin_waits_for_writes) {
      auto wait = marks.front().due - Clock::now();
      ns = std::clamp<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count(), 0, ns);
    }
    timeout.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    timeout.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (::ppoll(fds, 2, &timeout, nullptr) < 0 && errno != EINTR) return refused();
    for (const auto& fd : fds)
      if (fd.fd >= 0 && (fd.revents & POLLNVAL)) return refused();
  }
}

void serve_connection(int client, const Options& options, Clock::duration hold) {
  int server = connect_to(options.connect);
  if (server < 0) {
    std::fprintf(stderr, "sluice-delay-relay: cannot connect to %s:%s: %s\n", options.connect.host.c_str(),
                 options.connect.port.c_str(), std::strerror(errno));
    // The client sees what it would see on a real path: a reset.
    linger abort{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    ::close(client);
    std::lock_guard lock(totals.mutex);
    ++totals.failed;
    return;
  }
  set_nodelay(client);
  set_nodelay(server);
  set_nonblocking(client);
  set_nonblocking(server);

  auto stats = std::make_shared<std::array<DirectionStats, 2>>();
  {
    std::lock_guard lock(totals.mutex);
    ++totals.connections;
    totals.all.push_back(stats);
  }
  // Each direction passes its own end on (FIN or reset, delayed like the bytes); a
  // reset it sends wakes the other direction, which then stops.
  Link link;
  End up = End::eof;
  std::thread upstream([&] { up = forward(client, server, hold, options.buffer, (*stats)[0], link); });
  End down = forward(server, client, hold, options.buffer, (*stats)[1], link);
  upstream.join();
  // A receiver that refused bytes has gone: its peer learns it from a reset (here at
  // once, not RTT/2 later), not from an orderly close.
  linger abort{1, 0};
  if (down == End::peer_gone && up != End::reset) ::setsockopt(server, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  if (up == End::peer_gone && down != End::reset) ::setsockopt(client, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(client);
  ::close(server);
  bool clean = up == End::eof && down == End::eof;
  if (!clean) {
    std::lock_guard lock(totals.mutex);
    ++totals.failed;
  }
  if (!options.quiet)
    std::fprintf(stderr, "sluice-delay-relay: connection done (%s): %llu bytes up, %llu bytes down\n",
                 clean ? "clean" : "reset", static_cast<unsigned long long>((*stats)[0].bytes.load()),
                 static_cast<unsigned long long>((*stats)[1].bytes.load()));
}

void print_summary(const Options& options) {
  std::lock_guard lock(totals.mutex);
  DirectionStats up, down;
  for (const auto& s : totals.all) {
    (*s)[0].add_to(up);
    (*s)[1].add_to(down);
  }
  auto direction = [](const char* name, const DirectionStats& s) {
    std::printf(
        "\"%s\":{\"bytes\":%llu,\"releases\":%llu,\"backlogged_releases\":%llu,\"max_held_bytes\":%llu,"
        "\"late_us_p50_max\":%.0f,\"late_us_p99_max\":%.0f,\"late_us_max\":%.1f}",
        name, static_cast<unsigned long long>(s.bytes.load()), static_cast<unsigned long long>(s.releases.load()),
        static_cast<unsigned long long>(s.backlogged.load()),
        static_cast<unsigned long long>(s.max_held.load()), s.late_quantile_us(0.5), s.late_quantile_us(0.99),
        static_cast<double>(s.max_late_ns.load()) / 1000.0);
  };
  std::printf("{\"relay\":\"application-level RTT emulation\",\"rtt_ms\":%.3f,\"connections\":%llu,\"failed\":%llu,",
              options.rtt_ms, static_cast<unsigned long long>(totals.connections),
              static_cast<unsigned long long>(totals.failed));
  direction("up", up);
  std::printf(",");
  direction("down", down);
  std::printf("}\n");
  std::fflush(stdout);
}

}  // namespace

int relay_main(int argc, char** argv) {
  Options options = parse_options(argc, argv);
  auto hold = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(options.rtt_ms / 2));

  // The default 50 us timer slack would add up to 50 us to every 100 us hold.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  ::signal(SIGPIPE, SIG_IGN);
  // Only the accepting thread takes SIGTERM/SIGINT, inside ppoll; workers inherit the block.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  struct sigaction action {};
  action.sa_handler = [](int) {};
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  int listener = listen_on(options.listen);
  std::fprintf(stderr,
               "sluice-delay-relay: %s:%s -> %s:%s, emulating a %.3f ms RTT at the application level "
               "(each direction's bytes held %.3f ms; TCP ACKs and congestion control are not delayed)\n",
               options.listen.host.c_str(), options.listen.port.c_str(), options.connect.host.c_str(),
               options.connect.port.c_str(), options.rtt_ms, options.rtt_ms / 2);
  if (!options.ready_file.empty()) {
    sockaddr_storage bound{};
    socklen_t bound_length = sizeof bound;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_length);
    auto port = bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
    // Written whole, then renamed: a reader never sees half a line.
    std::string partial = options.ready_file + ".partial";
    std::FILE* ready = std::fopen(partial.c_str(), "w");
    if (!ready) die_errno("cannot write " + partial);
    std::fprintf(ready, "%u %d\n", static_cast<unsigned>(ntohs(port)), static_cast<int>(::getpid()));
    std::fclose(ready);
    if (::rename(partial.c_str(), options.ready_file.c_str()) != 0) die_errno("cannot rename " + partial);
  }

  sigset_t during_wait;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &during_wait);
  sigdelset(&during_wait, SIGTERM);
  sigdelset(&during_wait, SIGINT);
  for (;;) {
    pollfd fd{listener, POLLIN, 0};
    int rc = ::ppoll(&fd, 1, nullptr, &during_wait);
    if (rc < 0) {
      if (errno == EINTR) break;  // SIGTERM or SIGINT
      die_errno("poll");
    }
    int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (options.once) {
      serve_connection(client, options, hold);
      break;
    }
    std::thread(serve_connection, client, std::cref(options), hold).detach();
  }
  print_summary(options);
  // Connections still running (detached) end with the process.
  std::_Exit(0);
}

}  // namespace sluice::bench

int main(int argc, char** argv) { return sluice::bench::relay_main(argc, argv); }
