#include "apps/libsluice/nbd_endpoints.hpp"

#include "protocols/nbd/client/nbd_destination.hpp"
#include "protocols/nbd/client/nbd_source.hpp"
#include "protocols/nbd/client/target.hpp"

namespace sluice {

namespace {

nbd::ClientOptions client_options(const EndpointOptions& options) {
  nbd::ClientOptions client;
  // The endpoint's NODELAY and batching, with the client's own send-buffer choice.
  const bool fit_send_buffer = client.stream.fit_send_buffer;
  client.stream = options.stream;
  client.stream.fit_send_buffer = fit_send_buffer;
  client.connections = options.connections;
  client.threads = options.threads;
  client.timeout = options.timeout;
  client.connect_timeout = options.connect_timeout;
  client.cancellation = options.cancellation;
  client.notice = options.notice;
  return client;
}

}  // namespace

bool is_nbd_uri(const Uri& uri, const EndpointOptions& options) {
  return nbd::is_nbd_scheme(uri.scheme) ||
         ((uri.scheme == "tcp" || uri.scheme == "unix" || uri.scheme == "tls") && options.protocol == "nbd");
}

Status check_nbd_uri(const Uri& uri, const EndpointOptions& options) {
  auto target = nbd::parse_target(uri, options.tls);
  if (!target) return tl::unexpected(target.error());
  return {};
}

awaitable<Result<std::unique_ptr<Source>>> open_nbd_source(const Uri& uri, const EndpointOptions& options) {
  auto target = nbd::parse_target(uri, options.tls);
  if (!target) co_return tl::unexpected(target.error());
  nbd::ClientOptions client = client_options(options);
  auto source = co_await nbd::NbdSource::open(*target, std::move(client));
  if (!source) co_return tl::unexpected(source.error());
  co_return std::unique_ptr<Source>(std::move(*source));
}

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination(const Uri& uri, std::uint64_t size,
                                                                     const EndpointOptions& options) {
  auto target = nbd::parse_target(uri, options.tls);
  if (!target) co_return tl::unexpected(target.error());
  nbd::ClientOptions client = client_options(options);
  auto destination = co_await nbd::NbdDestination::open(*target, size, std::move(client));
  if (!destination) co_return tl::unexpected(destination.error());
  co_return std::unique_ptr<Destination>(std::move(*destination));
}

awaitable<Result<std::unique_ptr<Destination>>> open_nbd_destination_on_stream(std::unique_ptr<Stream> stream,
                                                                               std::string export_name,
                                                                               std::uint64_t size,
                                                                               const EndpointOptions& options) {
  nbd::ClientOptions client = client_options(options);
  client.export_name = export_name;
  std::string display = "nbd over " + stream->peer() + " (export '" + export_name + "')";
  auto destination =
      co_await nbd::NbdDestination::open_on(std::move(stream), std::move(display), size, std::move(client));
  if (!destination) co_return tl::unexpected(destination.error());
  co_return std::unique_ptr<Destination>(std::move(*destination));
}

}  // namespace sluice
