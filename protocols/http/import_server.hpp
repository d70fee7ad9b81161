// The receiver's half of the import handshake (`sluice serve --http`): read the
// request head (body bytes read past it stay in the reader), answer as xapi's
// /import_raw_vdi does, and say whether the body follows.
#pragma once

#include "engine/asio.hpp"
#include "protocols/common/stream_reader.hpp"
#include "protocols/http/import_response.hpp"
#include "protocols/http/request_parser.hpp"

namespace sluice {

// Success: the request was a PUT without Transfer-Encoding, it was answered 200 and
// the body follows in `reader`. Otherwise the refusal (400, 404, 405) has been sent
// and the error names the request and the status.
awaitable<Result<HttpRequestHead>> answer_http_import(StreamReader& reader);

}  // namespace sluice
