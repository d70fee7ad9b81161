// Test helper: run a coroutine to completion on a fresh io_context (io_uring backend).
#pragma once

#include <exception>
#include <optional>
#include <utility>

#include "engine/asio.hpp"

namespace sluice::test {

template <class T>
T run(asio::io_context& context, awaitable<T> task) {
  std::optional<T> result;
  std::exception_ptr failure;
  asio::co_spawn(context, std::move(task), [&](std::exception_ptr e, T value) {
    failure = e;
    if (!e) result.emplace(std::move(value));
  });
  context.run();
  context.restart();
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

template <class T>
T run(awaitable<T> task) {
  asio::io_context context(1);
  return run(context, std::move(task));
}

// A test body that checks as it goes.
inline void run(awaitable<void> body) {
  asio::io_context context(1);
  std::exception_ptr failure;
  asio::co_spawn(context, std::move(body), [&](std::exception_ptr e) { failure = e; });
  context.run();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace sluice::test
