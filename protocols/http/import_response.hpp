// What the receiver answers to an import request, as xapi's /import_raw_vdi does: a
// bare PUT gets 200 at once and its body (Chunked, unframed by HTTP) follows on the
// same connection until the sender closes it.
#pragma once

#include <string>
#include <string_view>

#include "protocols/http/request_parser.hpp"

namespace sluice {

struct ImportResponse {
  int status = 0;
  // Write `bytes`, then read the body from the same connection. When false, write
  // `bytes` and close: the request was refused.
  bool accepted = false;
  std::string bytes;  // the complete response: status line, headers, blank line, body
};

// - a method other than PUT: 405 with `Allow: PUT`;
// - any Transfer-Encoding header: 404, as xapi answers, with the reason spelled out,
//   since the body must be raw bytes right after the head;
// - otherwise 200 with exactly xapi's headers (minus its task-id).
ImportResponse decide_import_response(const HttpRequestHead& request);

// A refusal with a short text/plain explanation and `Connection: close`, for requests
// that did not even parse (400) and for decide_import_response's refusals.
std::string http_error_response(int status, std::string_view reason, std::string_view explanation);

}  // namespace sluice
