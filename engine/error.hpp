// Errors are values: every fallible operation returns Result<T>. An Error carries the
// errno-style code (for programs) and one sentence naming the operation, the offset
// and the cause (for people).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <tl/expected.hpp>

namespace sluice {

struct Error {
  std::error_code code;
  std::string message;

  // True for the follow-on errors of stages that were told to stop because a sibling
  // failed; the sibling's error is the one worth reporting.
  bool is_cancellation() const;
  // True when the peer went away: it closed or reset the connection (EPIPE,
  // ECONNRESET), whichever layer saw it first.
  bool is_peer_gone() const;
};

// The errno value `code` carries, from whichever category holds errno values (the
// generic and system ones, and Asio's, which does not compare equal to std::errc);
// 0 for any other category.
int errno_of(const std::error_code& code);

template <class T>
using Result = tl::expected<T, Error>;

using Status = Result<void>;

tl::unexpected<Error> fail(std::error_code code, std::string message);
tl::unexpected<Error> fail(std::errc code, std::string message);

// "<what> at offset <offset>: <strerror>" - the shape of every data-path error.
tl::unexpected<Error> fail_at(std::string_view what, std::uint64_t offset, std::error_code code);

tl::unexpected<Error> cancelled();

inline std::error_code errno_code(int err) { return {err, std::generic_category()}; }

}  // namespace sluice
