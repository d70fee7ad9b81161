#include "engine/error.hpp"

#include <asio/error.hpp>
#include <cerrno>

namespace sluice {

bool Error::is_cancellation() const {
  return code == std::errc::operation_canceled || code == asio::error::operation_aborted;
}

int errno_of(const std::error_code& code) {
  const bool errno_like = code.category() == std::generic_category() || code.category() == std::system_category() ||
                          code.category() == asio::error::get_system_category();
  return errno_like ? code.value() : 0;
}

bool Error::is_peer_gone() const {
  const int value = errno_of(code);
  return value == EPIPE || value == ECONNRESET;
}

tl::unexpected<Error> fail(std::error_code code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}

tl::unexpected<Error> fail(std::errc code, std::string message) {
  return fail(std::make_error_code(code), std::move(message));
}

tl::unexpected<Error> fail_at(std::string_view what, std::uint64_t offset, std::error_code code) {
  std::string msg(what);
  msg += " at offset ";
  msg += std::to_string(offset);
  msg += ": ";
  msg += code.message();
  return fail(code, std::move(msg));
}

tl::unexpected<Error> cancelled() {
  return fail(std::errc::operation_canceled, "cancelled");
}

}  // namespace sluice
