// The sender's half of the xen-api import handshake on a connected stream: send the
// PUT, then read the answer up to its blank line and not one byte further, because
// what follows belongs to the next protocol (an NBD handshake when the server says
// `Transfer-Encoding: nbd`). A non-2xx answer fails naming its status line.
#pragma once

#include "engine/asio.hpp"
#include "engine/net/stream.hpp"
#include "engine/uri.hpp"
#include "protocols/http/import_request.hpp"
#include "protocols/http/response_parser.hpp"

namespace sluice {

// No default argument: g++ 12 destroys a coroutine's defaulted temporary twice.
awaitable<Result<HttpResponseHead>> start_http_import(Stream& stream, const Uri& uri, ImportRequestOptions options);

}  // namespace sluice
