// The one place the engine pulls in Asio, so every file agrees on the configuration
// (io_uring backend, separate compilation; see the root meson.build) and on the few
// aliases the coroutine code uses everywhere.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/channel.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace sluice {

template <class T>
using awaitable = asio::awaitable<T>;

using executor = asio::any_io_executor;

// Completion token that hands back (error_code, results...) instead of throwing:
// the engine treats errors as values all the way up.
inline constexpr auto use_nothrow = asio::experimental::as_tuple(asio::use_awaitable);

}  // namespace sluice
