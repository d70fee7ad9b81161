#include "protocols/http/import_server.hpp"

#include <string>

namespace sluice {

namespace {

awaitable<Status> send_text(Stream& stream, const std::string& text) {
  co_return co_await stream.send(
      Frame{{}, {reinterpret_cast<const std::byte*>(text.data()), text.size()}});
}

}  // namespace

awaitable<Result<AcceptedImport>> answer_http_import(StreamReader& reader, const ImportPolicy& policy) {
  Stream& stream = reader.stream();
  HttpRequestParser parser;
  while (!parser.done()) {
    auto bytes = co_await reader.peek();
    if (!bytes) co_return tl::unexpected(bytes.error());
    if (bytes->empty()) {
      Status end = parser.at_end_of_stream();
      co_return tl::unexpected(end ? Error{std::make_error_code(std::errc::connection_reset),
                                           "the client closed the connection"}
                                   : end.error());
    }
    auto taken = parser.feed(*bytes);
    if (!taken) {
      co_await send_text(stream, http_error_response(400, "Bad Request", taken.error().message));
      co_return tl::unexpected(taken.error());
    }
    reader.consume(*taken);
  }
  const HttpRequestHead& request = parser.request();
  ImportResponse response = decide_import_response(request, policy);
  Status sent = co_await send_text(stream, response.bytes);
  if (!response.accepted) {
    std::string line = response.bytes.substr(0, response.bytes.find("\r\n"));
    co_return fail(std::errc::protocol_error, "refused the HTTP request '" +
                                                  quote_for_message(request.method + " " + request.target) +
                                                  "': answered '" + line + "': " + response.reason);
  }
  if (!sent) co_return tl::unexpected(sent.error());
  co_return AcceptedImport{request, response.framing};
}

}  // namespace sluice
