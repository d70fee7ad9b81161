// PageCacheWriter: buffered writes into one file, taken in turns, with every write that
// waited for a turn handed to the kernel together as one linked chain.
//
// A regular file's buffered writes are serialised by the kernel on the inode lock, so
// they go one turn at a time (several io-wq workers at once only spin on that lock).
// One at a time, though, each write was a trip to a worker and back to this thread
// before the next could start: an image with scattered zero blocks breaks into tens of
// thousands of short writes and spent most of its time on those trips
// (docs/benchmarks.md, section "Page-cache writes in chains").
// Writes that queue while a turn is taken now go as one chain, which one worker runs
// back to back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>

#include "engine/asio.hpp"
#include "engine/credits.hpp"
#include "engine/error.hpp"
#include "engine/parked_handler.hpp"
#include "engine/uring/file_ring.hpp"

namespace sluice {

class PageCacheWriter {
 public:
  // `turns`: chains in flight at once (1 for a regular file; a block device's buffered
  // writes take no inode lock and may run side by side).
  PageCacheWriter(executor ex, FileRing& ring, int fd, std::size_t turns);

  // Writes all of `bytes` at `offset`; the bytes must stay valid until it returns.
  awaitable<Status> write(std::uint64_t offset, std::span<const std::byte> bytes);

  // Other writes into the same page cache (splices) take turns with the chains.
  Credits& turns() { return turns_; }

  // Chains made so far, and the writes in them (stats and tests).
  std::uint64_t chains() const { return chains_; }
  std::uint64_t chained_writes() const { return chained_writes_; }

 private:
  // A writer sleeps with its handler parked in `slot` until wake() posts it: cheaper
  // than a timer per write, with no timer queue and nothing for the reactor to arm.
  static awaitable<void> sleep(std::unique_ptr<ParkedHandler>& slot);
  static void wake(std::unique_ptr<ParkedHandler>& slot);

  struct Pending {
    std::uint64_t offset = 0;
    std::span<const std::byte> bytes;
    int result = 0;
    bool taken = false;  // in a chain under way
    bool done = false;
    bool not_made = false;  // cancelled behind a failed write: goes again
    std::unique_ptr<ParkedHandler> sleeper;  // set while its writer sleeps
  };

  awaitable<Status> lead();
  awaitable<void> run_chain(std::span<Pending*> chain);
  void wake_next_leader();
  void forget(Pending* pending);

  FileRing& ring_;
  int fd_;
  Credits turns_;
  std::deque<Pending*> queue_;  // waiting for a turn, oldest first
  bool leader_waiting_ = false;
  std::uint64_t chains_ = 0;
  std::uint64_t chained_writes_ = 0;
};

}  // namespace sluice
