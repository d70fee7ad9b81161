// The receiver's half of the import handshake (`sluice serve --http`): read the
// request head (body bytes read past it stay in the reader), answer as xapi's
// /import_raw_vdi does, and say how the body that follows is framed.
#pragma once

#include "engine/asio.hpp"
#include "protocols/common/stream_reader.hpp"
#include "protocols/http/import_response.hpp"
#include "protocols/http/request_parser.hpp"

namespace sluice {

struct AcceptedImport {
  HttpRequestHead request;
  ImportFraming framing = ImportFraming::chunked;
};

// Success: the request was answered 200 and its body, framed as the request asked,
// follows in `reader`. Otherwise the refusal (400, 404, 405) has been sent before a
// byte of the body was read, and the error names the request and the reason.
awaitable<Result<AcceptedImport>> answer_http_import(StreamReader& reader, const ImportPolicy& policy);

}  // namespace sluice
