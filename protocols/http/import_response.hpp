// What the receiver answers to an import request, as xapi's /import_raw_vdi does: a
// PUT to an import path gets 200 at once, and its body (Chunked or raw, unframed by
// HTTP) follows on the same connection. The framing is the request's own choice, made
// as xapi makes it: a `chunked` query parameter or cookie means Chunked records, its
// absence a raw body of Content-Length bytes (or of the image's size without one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/http/request_parser.hpp"

namespace sluice {

enum class ImportFraming { chunked, raw };

std::string_view framing_name(ImportFraming framing);  // "chunked" or "raw"

// What the receiver will take, to judge each request against.
struct ImportPolicy {
  std::uint64_t image_size = 0;          // a raw body is exactly this long
  std::optional<ImportFraming> framing;  // `serve --protocol` given: only this framing
  std::vector<std::string> paths;        // more exact import paths (`serve --http-path`)
};

struct ImportResponse {
  int status = 0;
  // Write `bytes`, then read the body from the same connection, framed as `framing`.
  // When false, write `bytes` and close: the request was refused, for `reason`.
  bool accepted = false;
  std::string bytes;  // the complete response: status line, headers, blank line, body
  ImportFraming framing = ImportFraming::chunked;
  std::string reason;
};

// In this order, as xapi judges them:
// - a method other than PUT: 405 with `Allow: PUT`;
// - a path other than /import_raw_vdi, /services/SM/data/..., or one of policy.paths: 404;
// - any Transfer-Encoding header: 404, since the body must be raw bytes after the head;
// - a format other than raw (`format=vhd`, ...): 404;
// - a framing other than policy.framing: 400;
// - a raw body whose Content-Length is malformed or is not the image's size: 400;
// - otherwise 200 with exactly xapi's headers (minus its task-id).
ImportResponse decide_import_response(const HttpRequestHead& request, const ImportPolicy& policy);

// A refusal with a short text/plain explanation and `Connection: close`, for requests
// that did not even parse (400) and for decide_import_response's refusals.
std::string http_error_response(int status, std::string_view reason, std::string_view explanation);

}  // namespace sluice
