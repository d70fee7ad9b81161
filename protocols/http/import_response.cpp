#include "protocols/http/import_response.hpp"

#include <charconv>

#include "protocols/http/import_parameters.hpp"

namespace sluice {

namespace {

constexpr std::string_view accepted_response =
    "HTTP/1.1 200 OK\r\n"
    "Connection: close\r\n"
    "Cache-Control: no-cache, no-store\r\n"
    "content-type: application/octet-stream\r\n"
    "\r\n";

constexpr std::string_view shared_data_prefix = "/services/SM/data/";

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

ImportResponse refuse(int status, std::string_view reason, const std::string& explanation,
                      std::string_view extra_headers = {}, bool with_body = true) {
  return {status, false, refusal(status, reason, extra_headers, explanation, with_body), ImportFraming::chunked,
          explanation};
}

bool is_import_path(std::string_view path, const ImportPolicy& policy) {
  if (path == "/import_raw_vdi") return true;
  if (path.starts_with(shared_data_prefix) && path.size() > shared_data_prefix.size()) return true;
  for (const std::string& extra : policy.paths)
    if (path == extra) return true;
  return false;
}

std::optional<std::uint64_t> parse_length(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view framing_name(ImportFraming framing) {
  return framing == ImportFraming::raw ? "raw" : "chunked";
}

std::string http_error_response(int status, std::string_view reason, std::string_view explanation) {
  return refusal(status, reason, {}, explanation, true);
}

ImportResponse decide_import_response(const HttpRequestHead& request, const ImportPolicy& policy) {
  if (request.method != "PUT") {
    // A response to HEAD carries the body's length but never the body.
    return refuse(405, "Method Not Allowed", "This server accepts only PUT: the xapi import handshake.",
                  "Allow: PUT\r\n", request.method != "HEAD");
  }
  const std::string path = quote_for_message(request.path());
  if (!is_import_path(request.path(), policy))
    return refuse(404, "Not Found",
                  "No import at '" + path + "': this server imports at /import_raw_vdi and /services/SM/data/...");
  if (auto encoding = request.headers.find("Transfer-Encoding")) {
    return refuse(404, "Transfer-Encoding Not Supported",
                  "Transfer-Encoding '" + quote_for_message(*encoding) +
                      "' is not supported: the import body follows the headers as raw bytes or Chunked records.");
  }
  const ImportParameters parameters = ImportParameters::of(request);
  const std::string format = parameters.find("format").value_or("raw");
  if (format != "raw")
    return refuse(404, "Format Not Supported",
                  "format=" + quote_for_message(format) + " is not supported: this server imports raw images.");
  const ImportFraming framing = parameters.contains("chunked") ? ImportFraming::chunked : ImportFraming::raw;
  if (policy.framing && framing != *policy.framing) {
    const std::string wanted(framing_name(*policy.framing));
    return refuse(400, "Bad Request",
                  "The request asks for a " + std::string(framing_name(framing)) +
                      " body (by the presence or absence of a 'chunked' cookie or query parameter), but this"
                      " server takes only " + wanted + " (serve --protocol " + wanted + ").");
  }
  if (framing == ImportFraming::raw) {
    if (auto length_text = request.headers.find("Content-Length")) {
      auto length = parse_length(*length_text);
      if (!length)
        return refuse(400, "Bad Request", "Content-Length '" + quote_for_message(*length_text) + "' is not a number.");
      if (*length != policy.image_size)
        return refuse(400, "Bad Request",
                      "Content-Length " + std::to_string(*length) + " is not the image's size, " +
                          std::to_string(policy.image_size) + " bytes: a raw import fills the whole image.");
    }
  }
  return {200, true, std::string(accepted_response), framing, {}};
}

}  // namespace sluice
