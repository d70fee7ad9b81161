// The request that opens an import, byte for byte as vhd-tool sends it (through
// cohttp): PUT with no Content-Length and no Transfer-Encoding, so the body that
// follows is not HTTP-framed at all; the server answers before reading any of it.
#pragma once

#include <string>

#include "engine/error.hpp"
#include "engine/uri.hpp"

namespace sluice {

struct ImportRequestOptions {
  // `cookie: chunked=true` is how xapi learns the body is Chunked. vhd-tool sends it
  // even when the answer switches to NBD, so it stays on for that case too; turn it off
  // only for an unframed ("none") body, which xapi would otherwise misread.
  bool chunked = true;
  std::string user_agent = "sluice";
};

// PUT <path>[?<query>] HTTP/1.1, then host, user-agent, cookie and, when the URI has
// a user, `authorization: Basic base64(user:password)`, each line ending in CRLF,
// then a blank line. Refuses a URI without a host and anything that would put a
// space, a control byte or a line break into the request.
Result<std::string> build_import_request(const Uri& uri, const ImportRequestOptions& options = {});

}  // namespace sluice
