#include "engine/task_group.hpp"

#include <exception>
#include <stdexcept>
#include <utility>

namespace sluice {

TaskGroup::TaskGroup(executor ex, std::function<void(const Error&)> on_failure)
    : ex_(ex), on_failure_(std::move(on_failure)), idle_(ex, 1) {}

void TaskGroup::spawn(awaitable<Status> task) {
  ++running_;
  asio::co_spawn(ex_, std::move(task), [this](std::exception_ptr exception, Status result) {
    if (exception) {
      try {
        std::rethrow_exception(exception);
      } catch (const std::exception& e) {
        result = sluice::fail(std::errc::io_error, std::string("internal error: ") + e.what());
      } catch (...) {
        result = sluice::fail(std::errc::io_error, "internal error");
      }
    }
    if (!result) record(std::move(result.error()));
    if (--running_ == 0 && joining_) idle_.try_send(asio::error_code{}, true);
  });
}

void TaskGroup::fail(Error error) { record(std::move(error)); }

void TaskGroup::record(Error error) {
  if (error.is_cancellation()) {
    if (!cancellation_) cancellation_ = std::move(error);
  } else if (!error_) {
    error_ = std::move(error);
    if (on_failure_) on_failure_(*error_);
  }
}

awaitable<Status> TaskGroup::join() {
  if (running_ > 0) {
    joining_ = true;
    co_await idle_.async_receive(use_nothrow);
    joining_ = false;
  }
  if (error_) co_return tl::unexpected(*error_);
  if (cancellation_) co_return tl::unexpected(*cancellation_);
  co_return Status{};
}

}  // namespace sluice
