#include "apps/libsluice/stream_endpoints.hpp"

#include "apps/libsluice/nbd_endpoints.hpp"
#include "engine/net/address.hpp"
#include "engine/net/deadline.hpp"
#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "protocols/chunked/chunked_destination.hpp"
#include "protocols/http/import_client.hpp"
#include "protocols/http/import_request.hpp"
#include "protocols/raw/raw_destination.hpp"

namespace sluice {

namespace {

bool is_http(const Uri& uri) { return uri.scheme == "http" || uri.scheme == "https"; }
bool wants_tls(const Uri& uri) { return uri.scheme == "tls" || uri.scheme == "https"; }

Result<NetAddress> address_of(const Uri& uri) {
  NetAddress address;
  if (uri.scheme == "unix") {
    if (uri.path.empty()) return fail(std::errc::invalid_argument, "unix:// needs a socket path: unix:///PATH");
    address.kind = NetAddress::Kind::unix_socket;
    address.path = uri.path;
    return address;
  }
  if (uri.host.empty()) return fail(std::errc::invalid_argument, uri.scheme + ":// needs a host");
  address.host = uri.host;
  if (uri.port) {
    address.port = *uri.port;
  } else if (is_http(uri)) {
    address.port = uri.scheme == "https" ? 443 : 80;
  } else {
    return fail(std::errc::invalid_argument, uri.scheme + "://" + uri.host + " needs a port: " + uri.scheme +
                                                 "://HOST:PORT");
  }
  return address;
}

std::string timed_out_message(const std::string& what, const EndpointOptions& options) {
  return what + " did not finish within " + options.opening().describe();
}

awaitable<Result<std::unique_ptr<Stream>>> connect_stream(const Uri& uri, const NetAddress& address,
                                                          const EndpointOptions& options) {
  std::shared_ptr<TlsContext> tls;
  if (wants_tls(uri)) {
    auto context = TlsContext::create(TlsRole::client, options.tls);
    if (!context) co_return tl::unexpected(context.error());
    tls = *context;
  }
  auto socket = co_await connect_to(address, options.opening().seconds, options.cancellation);
  if (!socket) co_return tl::unexpected(socket.error());
  StreamOptions stream_options = options.stream;
  stream_options.stall_timeout = options.timeout;
  if (!tls) co_return std::unique_ptr<Stream>(std::make_unique<SocketStream>(std::move(*socket), stream_options));
  // The name to verify (and send as SNI) is the one the user connected to, unless told.
  std::string hostname = options.tls.hostname.empty() ? uri.host : options.tls.hostname;
  Deadline deadline(co_await asio::this_coro::executor, options.opening().seconds, socket->native_handle(), nullptr,
                    options.cancellation);
  auto stream = co_await TlsStream::handshake(tls, std::move(*socket), stream_options, hostname);
  deadline.disarm();
  if (deadline.cancelled()) co_return tl::unexpected(cancelled_error());
  if (deadline.fired()) co_return fail(std::errc::timed_out, timed_out_message("the TLS handshake", options));
  if (!stream) co_return tl::unexpected(stream.error());
  co_return std::unique_ptr<Stream>(std::move(*stream));
}

}  // namespace

bool is_stream_destination(const Uri& uri) {
  return uri.scheme == "tcp" || uri.scheme == "tls" || uri.scheme == "unix" || uri.scheme == "http" ||
         uri.scheme == "https";
}

Status check_stream_destination(const Uri& uri, const EndpointOptions& options) {
  const std::string protocol = options.protocol.empty() ? "chunked" : options.protocol;
  if (protocol != "chunked" && protocol != "raw")
    return fail(std::errc::invalid_argument, uri.scheme + "://: --protocol " + protocol + " is not available here" +
                                                 (protocol == "nbd" ? " (use nbds:// for NBD over TLS)" : ""));
  auto address = address_of(uri);
  if (!address) return tl::unexpected(address.error());
  if (is_http(uri)) {
    // A path or host that cannot go into a request line (spaces, control characters).
    auto request = build_import_request(uri);
    if (!request) return tl::unexpected(request.error());
  }
  return {};
}

awaitable<Result<std::unique_ptr<Destination>>> open_stream_destination(const Uri& uri, std::uint64_t size,
                                                                        const EndpointOptions& options) {
  if (Status ok = check_stream_destination(uri, options); !ok) co_return tl::unexpected(ok.error());
  const std::string protocol = options.protocol.empty() ? "chunked" : options.protocol;
  auto address = address_of(uri);
  if (!address) co_return tl::unexpected(address.error());
  auto stream = co_await connect_stream(uri, *address, options);
  if (!stream) co_return tl::unexpected(stream.error());
  std::string peer = (*stream)->peer();

  if (is_http(uri)) {
    ImportRequestOptions request;
    // The cookie tells xapi the body is Chunked; an unframed body must not claim it.
    request.chunked = protocol == "chunked";
    request.user_agent = "sluice";
    Deadline deadline(co_await asio::this_coro::executor, options.opening().seconds, (*stream)->socket_fd(), stream->get(),
                      options.cancellation);
    auto answer = co_await start_http_import(**stream, uri, request);
    deadline.disarm();
    if (deadline.cancelled()) co_return tl::unexpected(cancelled_error());
    if (deadline.fired())
      co_return fail(std::errc::timed_out, uri.scheme + "://" + uri.authority() + uri.raw_path + ": " +
                                               timed_out_message("the HTTP request (waiting for its answer)", options));
    if (!answer)
      co_return fail(answer.error().code,
                     uri.scheme + "://" + uri.authority() + uri.raw_path + ": " + answer.error().message);
    if (answer->transfer_encoding_nbd)
      co_return co_await open_nbd_destination_on_stream(std::move(*stream), "", size, options);
  }

  if (protocol == "raw")
    co_return std::unique_ptr<Destination>(
        std::make_unique<RawDestination>(std::move(*stream), size, "raw stream to " + peer));
  co_return std::unique_ptr<Destination>(
      std::make_unique<ChunkedDestination>(std::move(*stream), size, "chunked stream to " + peer));
}

}  // namespace sluice
