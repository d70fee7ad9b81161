#include "protocols/http/import_response.hpp"

namespace sluice {

namespace {

constexpr std::string_view accepted_response =
    "HTTP/1.1 200 OK\r\n"
    "Connection: close\r\n"
    "Cache-Control: no-cache, no-store\r\n"
    "content-type: application/octet-stream\r\n"
    "\r\n";

std::string refusal(int status, std::string_view reason, std::string_view extra_headers,
                    std::string_view explanation, bool with_body) {
  std::string body = std::string(explanation) + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  out += extra_headers;
  out += "Connection: close\r\n";
  out += "Content-Type: text/plain\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "\r\n";
  if (with_body) out += body;
  return out;
}

}  // namespace

std::string http_error_response(int status, std::string_view reason, std::string_view explanation) {
  return refusal(status, reason, {}, explanation, true);
}

ImportResponse decide_import_response(const HttpRequestHead& request) {
  if (request.method != "PUT") {
    // A response to HEAD carries the body's length but never the body.
    return {405, false,
            refusal(405, "Method Not Allowed", "Allow: PUT\r\n",
                    "This server accepts only PUT: the xapi import handshake, with a Chunked body.",
                    request.method != "HEAD")};
  }
  if (auto encoding = request.headers.find("Transfer-Encoding")) {
    return {404, false,
            refusal(404, "Transfer-Encoding Not Supported", {},
                    "Transfer-Encoding '" + quote_for_message(*encoding) +
                        "' is not supported: the import body follows the headers as raw Chunked records.",
                    true)};
  }
  return {200, true, std::string(accepted_response)};
}

}  // namespace sluice
