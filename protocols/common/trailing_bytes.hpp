// After the last byte a receiver expects: does the sender have more to say? A raw
// stream has no terminator, so a sender whose image is larger than the receiver's
// --size would otherwise see its extra bytes dropped and both ends report success; a
// Chunked stream with bytes after its end marker is not the stream its sender meant.
#pragma once

#include <chrono>

#include "engine/asio.hpp"
#include "engine/error.hpp"
#include "protocols/common/stream_reader.hpp"

namespace sluice {

// How many more bytes arrived (at least one) within `grace`, without taking them; 0
// when the stream ends or `grace` passes without one (then the stream's reads are
// stopped, as an idle receiver's are). A read error is returned as it is.
awaitable<Result<std::size_t>> bytes_follow(StreamReader& reader, std::chrono::milliseconds grace);

}  // namespace sluice
