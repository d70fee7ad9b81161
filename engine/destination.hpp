// Destination: the other half of the ops table.
#pragma once

#include <chrono>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/buffer.hpp"
#include "engine/error.hpp"
#include "engine/file_slice.hpp"
#include "engine/source.hpp"
#include "engine/stats.hpp"

namespace sluice {

// What a destination says about itself; the copy is planned from it
// (engine/copy_plan.hpp). The same kind of facts as SourceTraits, and more.
struct DestinationTraits {
  BlockSizes block_sizes{};
  // A network destination's measured round trip (zero: local, or not known). A long one
  // raises the automatic depth.
  std::chrono::microseconds round_trip{0};
  // write() and zero() may be called from several event loops at once, one per lane
  // of a striped copy (CopyOptions::lanes), once serve_lanes() has been called;
  // flush() and finish() still come from the copy's own loop, after every lane ended.
  bool takes_lanes = false;
  // write_file() may be used: the destination can send bytes straight from a file (a
  // plain socket that splices).
  bool takes_file_slices = false;
  // Sending file slices is faster here than sending buffers, which decides it under
  // ZeroCopy::automatic. Most destinations that take them should say so.
  bool file_slices_pay = false;
  // write_from_pipe() may be used: a file the kernel can splice into (a receiver then
  // moves payload socket -> pipe -> file, one copy instead of two).
  bool takes_pipes = false;
  // Every byte already reads as zero (a fresh file, a prezeroed disk): zero ranges
  // need no work at all.
  bool known_zero = false;
  // zero() is cheaper than writing zeros, so scanning data for zero runs pays.
  bool zero_is_cheap = true;
  // Keeps nothing (null:): zeros found in data would save nothing, so none are looked
  // for.
  bool discards = false;
  // Writes and zeros must be issued one at a time in offset order (a raw byte stream).
  bool ordered = false;
  // Writes the destination takes at once, where that is more than the copy's depth:
  // it bounds what it holds itself (buffers bound their memory, pipes their splices),
  // and short writes that wait together cost less (a data run between zero blocks).
  // 0: the copy's depth.
  std::size_t writes_in_flight = 0;
  // write() lets go of its buffer once the bytes are in the kernel, before the write
  // completes (the NBD client: the server answers later). The copy's buffers then bound
  // only how far reads run ahead of the sends; write slots bound the writes.
  bool releases_buffers_when_sent = false;
};

enum class ZeroMode : std::uint8_t {
  may_punch,  // a hole is fine
  allocate,   // the range must stay allocated (--allocated)
};

class Destination {
 public:
  virtual ~Destination() = default;

  virtual DestinationTraits traits() const = 0;
  virtual std::string describe() const = 0;

  // Writes `data` at `offset`. Takes ownership: the buffer is released only once the
  // destination is done with it (the bytes are on storage, in the kernel, or acked).
  virtual awaitable<Status> write(std::uint64_t offset, Buffer data) = 0;

  // The loops the destination's own work runs on (an NBD client's connections), the
  // caller's first, where lanes must run rather than on loops of the copier's own: a
  // lane then drives the part of the destination that lives on its loop, with no hop
  // to another thread. Empty: lanes may run on any loop. Asked only where
  // traits().takes_lanes.
  virtual std::vector<executor> lane_loops() const { return {}; }

  // The copy runs in lanes from now on (on lane_loops(), where it named any); called
  // once on the caller's loop before any lane starts.
  virtual void serve_lanes() {}

  // Writes the bytes `slice` names at `offset`, without them passing through memory.
  // Only called when traits().takes_file_slices is true.
  virtual awaitable<Status> write_file(std::uint64_t offset, FileSlice /*slice*/) {
    co_return fail_at("writing from a file", offset, std::make_error_code(std::errc::operation_not_supported));
  }

  // Writes the `length` bytes waiting in the pipe whose read end is `pipe` at
  // `offset`, leaving the pipe empty. Only called when traits().takes_pipes is true.
  // The arguments come in Image::write_from_pipe's order.
  virtual awaitable<Status> write_from_pipe(std::uint64_t offset, std::size_t /*length*/, int /*pipe*/) {
    co_return fail_at("writing from a pipe", offset, std::make_error_code(std::errc::operation_not_supported));
  }

  // Makes [offset, offset + length) read as zeros, the cheapest correct way.
  virtual awaitable<Status> zero(std::uint64_t offset, std::uint64_t length, ZeroMode mode) = 0;

  // Everything completed so far reaches stable storage.
  virtual awaitable<Status> flush() = 0;

  // Ends the transfer cleanly (stream terminator, NBD disconnect, close).
  virtual awaitable<Status> finish() = 0;

  // Releases what is still held, after finish() or after a failure, and waits for
  // anything the destination still runs (an NBD reply reader) to end: always awaited
  // before the destination is destroyed. Nothing is sent that could complete a
  // transfer that failed; a connection that is still healthy is ended the way its
  // protocol ends a session (NBD: DISC).
  virtual awaitable<Status> close() { co_return Status{}; }

  // Makes operations in progress fail promptly: the copy stopped and they did not
  // finish within its grace period (CopyOptions::stop_grace).
  virtual void abort() {}

  virtual void add_stats(TransferStats&) const {}
};

}  // namespace sluice
