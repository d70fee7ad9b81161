// run_on: awaits a coroutine on another event loop and resumes the caller on its own.
//
// Objects bound to a loop (sockets, timers, rings) may only be touched from that
// loop's thread; a coroutine on another loop reaches them by running the work there.
// When the target is the caller's own loop the work runs inline, with no hop.
//
// The caller's io_context receives the completion from the other thread, so it must
// not have been created with one of Asio's UNSAFE concurrency hints.
#pragma once

#include <utility>

#include "engine/asio.hpp"

namespace sluice {

// Each co_await is a statement of its own: the shorter form with the co_await inside
// the if condition and `co_return co_await` after it crashed in the g++ 12 build on
// resumption (reading the executor from a frame that was no longer live).
template <class T>
awaitable<T> run_on(executor loop, awaitable<T> work) {
  const executor here = co_await asio::this_coro::executor;
  if (loop == here) {
    T result = co_await std::move(work);
    co_return result;
  }
  T result = co_await asio::co_spawn(loop, std::move(work), asio::use_awaitable);
  co_return result;
}

inline awaitable<void> run_on(executor loop, awaitable<void> work) {
  const executor here = co_await asio::this_coro::executor;
  if (loop == here) {
    co_await std::move(work);
    co_return;
  }
  co_await asio::co_spawn(loop, std::move(work), asio::use_awaitable);
}

}  // namespace sluice
