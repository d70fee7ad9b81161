// TaskGroup: structured concurrency for coroutines on one executor.
//
// Children run concurrently; join() waits for every one of them. The first child to
// fail (other than by cancellation) records the group's error and fires the
// on_failure hook once with it, whose job is to make the siblings stop (close the
// channels and pools they wait on, shut the sockets) and, for a group nested in
// another, to hand the error up at once. A group is never destroyed with a child still
// running: whoever spawns must co_await join().
#pragma once

#include <cassert>
#include <cstddef>
#include <functional>
#include <optional>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class TaskGroup {
 public:
  explicit TaskGroup(executor ex, std::function<void(const Error&)> on_failure = {});
  // A child still running would touch a freed group: that is a bug in the spawner.
  ~TaskGroup() { assert(running_ == 0 && "TaskGroup destroyed with children running; join() first"); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  void spawn(awaitable<Status> task);

  // Waits until no child is running; the first real error, if any.
  awaitable<Status> join();

  // Records an error as if a child had failed with it.
  void fail(Error error);

  bool failed() const { return error_.has_value(); }
  std::size_t running() const { return running_; }

 private:
  void record(Error error);

  executor ex_;
  std::function<void(const Error&)> on_failure_;
  std::size_t running_ = 0;
  std::optional<Error> error_;
  std::optional<Error> cancellation_;  // reported only when nothing better is known
  asio::experimental::channel<void(asio::error_code, bool)> idle_;  // see Credits
  bool joining_ = false;
};

}  // namespace sluice
