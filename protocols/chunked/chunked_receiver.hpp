// The receiving end of a Chunked stream (`sluice serve --protocol chunked`), as
// vhd-tool's serve_chunked_to_raw behaves, with the checks it lacks: every header is
// validated before its payload is read (alignment, length limit, the image's bounds),
// and the stream must end with the terminator. Payloads are read straight into pooled
// buffers and written through the Destination with several writes in flight; success
// is returned only after the destination was flushed.
#pragma once

#include "engine/destination.hpp"
#include "protocols/common/receive_writer.hpp"
#include "protocols/common/stream_reader.hpp"

namespace sluice {

// Reads chunks from `reader` until the terminator and writes them to `destination`,
// then flushes and finishes it. On a malformed, truncated or out-of-bounds stream, or
// a failed write, stops at once (what was written stays) and returns one error naming
// the chunk's offset and the cause.
awaitable<Result<ReceiveResult>> receive_chunked(StreamReader& reader, Destination& destination,
                                                 const ReceiveOptions& options);

}  // namespace sluice
