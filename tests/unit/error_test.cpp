// Error's classifications: which failures are follow-ons of a stop, which mean the
// peer went away, whatever layer and error category reported them.
#include "engine/error.hpp"

#include <doctest/doctest.h>

#include <asio/error.hpp>
#include <cerrno>

using sluice::Error;

TEST_CASE("Error::is_peer_gone: EPIPE and ECONNRESET in any errno category") {
  CHECK(Error{std::make_error_code(std::errc::broken_pipe), ""}.is_peer_gone());
  CHECK(Error{std::make_error_code(std::errc::connection_reset), ""}.is_peer_gone());
  CHECK(Error{std::error_code(EPIPE, std::system_category()), ""}.is_peer_gone());
  CHECK(Error{asio::error_code(ECONNRESET, asio::error::get_system_category()), ""}.is_peer_gone());
  CHECK(Error{asio::error::connection_reset, ""}.is_peer_gone());
  CHECK_FALSE(Error{std::make_error_code(std::errc::timed_out), ""}.is_peer_gone());
  CHECK_FALSE(Error{std::make_error_code(std::errc::io_error), ""}.is_peer_gone());
  CHECK_FALSE(Error{asio::error::eof, ""}.is_peer_gone());  // misc category, value 2
}

TEST_CASE("Error::is_cancellation") {
  CHECK(Error{std::make_error_code(std::errc::operation_canceled), ""}.is_cancellation());
  CHECK(Error{asio::error::operation_aborted, ""}.is_cancellation());
  CHECK_FALSE(Error{std::make_error_code(std::errc::broken_pipe), ""}.is_cancellation());
}
