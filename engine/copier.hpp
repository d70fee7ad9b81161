// The copy pipeline:
//
//   expander --items--> reader --filled--> writer --> Destination
//   (extents)          (Source reads,      (writes / zeros,
//                       zero detection)     up to depth in flight)
//
// Each stage is a coroutine; bounded channels couple them. Buffers from one pool are
// the credit: the reader needs one to start a read and the writer's request drops it
// when the destination is done, so the pool size bounds what is in flight.
#pragma once

#include "engine/asio.hpp"
#include "engine/copy_options.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/source.hpp"
#include "engine/stats.hpp"

namespace sluice {

// Copies all of `source` onto `destination`, flushes (unless told not to) and finishes
// the destination. On failure every stage is stopped and awaited, and the one error
// returned names the operation, the offset and the cause.
awaitable<Result<TransferStats>> copy(Source& source, Destination& destination,
                                      CopyOptions options);

}  // namespace sluice
