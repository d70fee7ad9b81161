// The receiving end of a raw ("none") stream: exactly image_size bytes, written in
// order from offset 0, as vhd-tool's serve_raw_to_raw reads them. A stream that ends
// early is an error; what arrived is written before the error is returned.
#pragma once

#include "engine/destination.hpp"
#include "protocols/common/receive_writer.hpp"
#include "protocols/common/stream_reader.hpp"

namespace sluice {

awaitable<Result<ReceiveResult>> receive_raw(StreamReader& reader, Destination& destination,
                                             const ReceiveOptions& options);

}  // namespace sluice
