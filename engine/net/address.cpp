#include "engine/net/address.hpp"

#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/net/deadline.hpp"
#include "engine/uri.hpp"

namespace sluice {

std::string NetAddress::describe() const {
  if (kind == Kind::unix_socket) return "unix " + path;
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "tcp " + h + ":" + std::to_string(port);
}

awaitable<Result<Socket>> connect_to(const NetAddress& address) {
  co_return co_await connect_to(address, std::chrono::seconds{0});
}

namespace {

// One connection attempt, bounded by `timeout` (shutting down a socket that is still
// connecting makes the connect fail at once).
awaitable<asio::error_code> attempt_connect(Socket& socket, const asio::generic::stream_protocol::endpoint& endpoint,
                                            std::chrono::seconds timeout, Cancellation* cancellation,
                                            bool* timed_out, bool* cancelled) {
  asio::error_code ec;
  socket.open(endpoint.protocol(), ec);
  if (ec) co_return ec;
  Deadline deadline(co_await asio::this_coro::executor, timeout, socket.native_handle(), nullptr, cancellation);
  auto [connect_ec] = co_await socket.async_connect(endpoint, use_nothrow);
  deadline.disarm();
  *timed_out = deadline.fired();
  *cancelled = deadline.cancelled();
  co_return connect_ec;
}

std::string connect_failure(const NetAddress& address, asio::error_code ec, bool timed_out,
                            std::chrono::seconds timeout) {
  if (timed_out)
    return "cannot connect to " + address.describe() + ": no answer within " + std::to_string(timeout.count()) +
           " seconds";
  return "cannot connect to " + address.describe() + ": " + ec.message();
}

}  // namespace

awaitable<Result<Socket>> connect_to(const NetAddress& address, std::chrono::seconds timeout,
                                     Cancellation* cancellation) {
  auto ex = co_await asio::this_coro::executor;
  bool timed_out = false;
  bool cancelled = false;
  if (address.kind == NetAddress::Kind::unix_socket) {
    asio::local::stream_protocol::endpoint local(address.path);
    asio::generic::stream_protocol::endpoint endpoint(local);
    Socket socket(ex);
    asio::error_code ec = co_await attempt_connect(socket, endpoint, timeout, cancellation, &timed_out, &cancelled);
    if (cancelled) co_return tl::unexpected(cancelled_error());
    if (ec || timed_out)
      co_return fail(timed_out ? std::make_error_code(std::errc::timed_out) : ec,
                     connect_failure(address, ec, timed_out, timeout));
    co_return socket;
  }
  asio::ip::tcp::resolver resolver(ex);
  auto [rec, results] = co_await resolver.async_resolve(address.host, std::to_string(address.port),
                                                        asio::ip::resolver_base::numeric_service, use_nothrow);
  if (rec) co_return fail(rec, "cannot resolve " + address.host + ": " + rec.message());
  asio::error_code last = asio::error::host_not_found;
  for (const auto& entry : results) {
    asio::generic::stream_protocol::endpoint endpoint(entry.endpoint());
    Socket attempt(ex);
    asio::error_code ec = co_await attempt_connect(attempt, endpoint, timeout, cancellation, &timed_out, &cancelled);
    if (cancelled) co_return tl::unexpected(cancelled_error());
    if (!ec && !timed_out) co_return attempt;
    last = ec;
  }
  co_return fail(timed_out ? std::make_error_code(std::errc::timed_out) : last,
                 connect_failure(address, last, timed_out, timeout));
}

namespace {

// Whether a socket in this network namespace listens on `path`, read from
// /proc/net/unix (its flags carry __SO_ACCEPTCON, 0x10000, for a listener), so a live
// server is found without connecting to it. A path bound relative to another
// directory is not recognised; nothing else is missed.
bool unix_listener_exists(const std::string& path) {
  std::ifstream table("/proc/net/unix");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, refs, protocol, flags, type, state, inode, bound;
    if (!(fields >> slot >> refs >> protocol >> flags >> type >> state >> inode)) continue;
    std::getline(fields >> std::ws, bound);  // the rest of the line: a path may hold spaces
    if (bound == path && (std::strtoul(flags.c_str(), nullptr, 16) & 0x10000) != 0) return true;
  }
  return false;
}

}  // namespace

Result<Acceptor> listen_on(executor ex, const NetAddress& address, int backlog) {
  Acceptor acceptor(ex);
  asio::error_code ec;
  auto failed = [&](const char* step) {
    return fail(ec, std::string("cannot listen on ") + address.describe() + " (" + step + "): " + ec.message());
  };
  if (address.kind == NetAddress::Kind::unix_socket) {
    // A stale socket file from a server that is gone is replaced; one a live server
    // listens on is not (its clients would silently reach this one instead). Connecting
    // would tell the two apart too, but a --once server would take that connection
    // for its transfer. Anything else at the path is left alone.
    struct stat st {};
    if (::lstat(address.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return fail(std::errc::file_exists,
                    "cannot listen on " + address.describe() + ": the path exists and is not a socket");
      if (unix_listener_exists(address.path))
        return fail(std::errc::address_in_use,
                    "cannot listen on " + address.describe() + ": another server is listening on it");
      ::unlink(address.path.c_str());
    }
    asio::generic::stream_protocol::endpoint endpoint(asio::local::stream_protocol::endpoint(address.path));
    acceptor.open(endpoint.protocol(), ec);
    if (ec) return failed("socket");
    acceptor.bind(endpoint, ec);
    if (ec) return failed("bind");
  } else {
    asio::ip::tcp::resolver resolver(ex);
    auto results = resolver.resolve(address.host.empty() ? "::" : address.host, std::to_string(address.port),
                                    asio::ip::resolver_base::passive | asio::ip::resolver_base::numeric_service, ec);
    if (ec || results.empty()) return failed("resolve");
    asio::generic::stream_protocol::endpoint endpoint(results.begin()->endpoint());
    acceptor.open(endpoint.protocol(), ec);
    if (ec) return failed("socket");
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    acceptor.bind(endpoint, ec);
    if (ec) return failed("bind");
  }
  acceptor.listen(backlog, ec);
  if (ec) return failed("listen");
  return acceptor;
}

std::uint16_t bound_port(const Acceptor& acceptor) {
  asio::error_code ec;
  auto endpoint = acceptor.local_endpoint(ec);
  if (ec) return 0;
  const sockaddr* sa = endpoint.data();
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

}  // namespace sluice

namespace sluice {

Result<ListenUri> parse_listen_uri(std::string_view text) {
  auto uri = parse_uri(text, PortZero::allowed);
  if (!uri) return tl::unexpected(uri.error());
  ListenUri out;
  if (uri->scheme == "unix") {
    if (uri->path.empty()) return fail(std::errc::invalid_argument, "'" + std::string(text) + "': no socket path");
    out.address = NetAddress{NetAddress::Kind::unix_socket, {}, 0, uri->path};
    return out;
  }
  if (uri->scheme != "tcp" && uri->scheme != "tls")
    return fail(std::errc::invalid_argument, "'" + std::string(text) + "': expected tcp://, tls:// or unix://");
  if (!uri->port) return fail(std::errc::invalid_argument, "'" + std::string(text) + "': no port");
  out.address = NetAddress{NetAddress::Kind::tcp, uri->host, *uri->port, {}};
  out.tls = uri->scheme == "tls";
  return out;
}

}  // namespace sluice
