#include "protocols/http/import_client.hpp"

namespace sluice {

awaitable<Result<HttpResponseHead>> start_http_import(Stream& stream, const Uri& uri, ImportRequestOptions options) {
  auto request = build_import_request(uri, options);
  if (!request) co_return tl::unexpected(request.error());
  const auto* bytes = reinterpret_cast<const std::byte*>(request->data());
  if (Status s = co_await stream.send(Frame{{}, {bytes, request->size()}}); !s) co_return tl::unexpected(s.error());
  HttpResponseParser parser;
  // One byte at a time, as vhd-tool reads it: the head is a few hundred bytes, and
  // reading ahead would swallow the start of an NBD handshake.
  while (!parser.done()) {
    std::byte byte{};
    auto n = co_await stream.read_some({&byte, 1});
    if (!n) co_return tl::unexpected(n.error());
    if (*n == 0) {
      Status end = parser.at_end_of_stream();
      co_return tl::unexpected(end ? Error{std::make_error_code(std::errc::connection_reset),
                                           "the server closed the connection"}
                                   : end.error());
    }
    auto fed = parser.feed(std::span<const std::byte>(&byte, 1));
    if (!fed) co_return tl::unexpected(fed.error());
  }
  co_return parser.response();
}

}  // namespace sluice
