// copy(): moves a Source onto a Destination.
//
// copy() first plans the copy from what both ends say of themselves and the options
// (engine/copy_plan.hpp), then carries the plan out. The work is done by lanes
// (engine/copy_lane.hpp), each a pipeline of coroutine stages coupled by bounded
// channels. Most copies run one lane, on the caller's event loop. Where both ends
// allow it (SourceTraits::serves_lanes, DestinationTraits::takes_lanes: today a local
// file read into null: or into an NBD export) and the image spans more than one
// stripe, the copy runs several lanes side by side, each on a loop and thread of its
// own (the destination's, where it names its own: Destination::lane_loops), claiming
// stripes of the image in turn and sharing the depth. A lane's thread then does its
// own page-cache copies instead of handing each read to a kernel worker, a hand-off
// that costs CPU on every read (docs/benchmarks.md, section "Lanes").
#pragma once

#include "engine/asio.hpp"
#include "engine/copy_options.hpp"
#include "engine/destination.hpp"
#include "engine/error.hpp"
#include "engine/source.hpp"
#include "engine/stats.hpp"

namespace sluice {

// Copies all of `source` onto `destination`, flushes (unless told not to) and finishes
// the destination, on the caller's loop. On failure or cancellation nothing more is
// issued and every lane is awaited, its requests in flight given options.stop_grace to
// complete before both ends are aborted; the one error returned names the operation,
// the offset and the cause. Progress
// calls are made on the caller's loop whichever lane completed the bytes, so lanes
// post to that loop from their threads: its io_context must not have been created
// with one of Asio's UNSAFE concurrency hints (as for run_on).
awaitable<Result<TransferStats>> copy(Source& source, Destination& destination,
                                      CopyOptions options);

}  // namespace sluice
