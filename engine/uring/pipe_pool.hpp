// PipePool: the pipes a splicing receiver moves payload through. A piece spliced from
// the socket into a pipe stays there until its write into the file completes, so the
// pool's size bounds the writes in flight, as a buffer pool does for memory.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/asio.hpp"
#include "engine/credits.hpp"
#include "engine/error.hpp"
#include "engine/uring/pipe.hpp"

namespace sluice {

class PipePool {
 public:
  PipePool(executor ex, std::size_t count);

  // A free, empty pipe (created on first use); waits while every pipe is in use.
  awaitable<Result<Pipe*>> acquire();
  // `emptied`: the pipe holds nothing any more. A pipe that may still hold bytes (its
  // write failed) is closed instead of being reused.
  void release(Pipe* pipe, bool emptied);
  // Wakes every waiter with a cancellation.
  void close() { credits_.close(); }

 private:
  Credits credits_;
  std::vector<std::unique_ptr<Pipe>> pipes_;
  std::vector<std::size_t> free_;  // indexes into pipes_
};

}  // namespace sluice
