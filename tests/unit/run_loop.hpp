// Test helper: run a coroutine to completion on an io_context (io_uring backend).
// context.run() returns once nothing is left to do, which is also what happens when the
// coroutine waits on something no one will ever complete: run() tells the two apart and
// fails the test case instead of passing it (or reading a result that never came).
#pragma once

#include <doctest/doctest.h>

#include <exception>
#include <optional>
#include <utility>

#include "engine/asio.hpp"

namespace sluice::test {

inline constexpr char never_finished[] =
    "the coroutine did not finish: it waits on something that never comes";

// The coroutine's value once the loop ran out of work, or nothing when it had not
// finished by then. An exception it threw is rethrown.
template <class T>
std::optional<T> run_until_idle(asio::io_context& context, awaitable<T> task) {
  std::optional<T> result;
  std::exception_ptr failure;
  asio::co_spawn(context, std::move(task), [&](std::exception_ptr e, T value) {
    failure = e;
    if (!e) result.emplace(std::move(value));
  });
  context.run();
  context.restart();
  if (failure) std::rethrow_exception(failure);
  return result;
}

// Whether the body finished before the loop ran out of work.
inline bool run_until_idle(asio::io_context& context, awaitable<void> body) {
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(context, std::move(body), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
  });
  context.run();
  context.restart();
  if (failure) std::rethrow_exception(failure);
  return finished;
}

template <class T>
T run(asio::io_context& context, awaitable<T> task) {
  std::optional<T> result = run_until_idle(context, std::move(task));
  if (!result) FAIL(never_finished);
  return std::move(*result);
}

template <class T>
T run(awaitable<T> task) {
  asio::io_context context(1);
  return run(context, std::move(task));
}

// A test body that checks as it goes.
inline void run(asio::io_context& context, awaitable<void> body) {
  if (!run_until_idle(context, std::move(body))) FAIL(never_finished);
}

inline void run(awaitable<void> body) {
  asio::io_context context(1);
  run(context, std::move(body));
}

}  // namespace sluice::test
