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

TEST_CASE("errno_of: the errno value from every category that holds one, 0 from others") {
  using sluice::errno_of;
  CHECK(errno_of(std::make_error_code(std::errc::too_many_files_open)) == EMFILE);
  CHECK(errno_of(std::error_code(ENFILE, std::system_category())) == ENFILE);
  CHECK(errno_of(asio::error_code(ENOBUFS, asio::error::get_system_category())) == ENOBUFS);
  CHECK(errno_of(asio::error::no_memory) == ENOMEM);
  CHECK(errno_of(asio::error::eof) == 0);  // misc category, value 2 (not ENOENT)
  CHECK(errno_of(std::error_code()) == 0);
}
