#include "protocols/nbd/protocol.hpp"

#include <cerrno>
#include <cstdio>

namespace sluice::nbd {

namespace {

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", value);
  return text;
}

}  // namespace

std::string to_string(Option option) {
  switch (option) {
    case Option::export_name: return "EXPORT_NAME";
    case Option::abort: return "ABORT";
    case Option::list: return "LIST";
    case Option::peek_export: return "PEEK_EXPORT";
    case Option::starttls: return "STARTTLS";
    case Option::info: return "INFO";
    case Option::go: return "GO";
    case Option::structured_reply: return "STRUCTURED_REPLY";
    case Option::list_meta_context: return "LIST_META_CONTEXT";
    case Option::set_meta_context: return "SET_META_CONTEXT";
    case Option::extended_headers: return "EXTENDED_HEADERS";
  }
  return "option " + std::to_string(static_cast<std::uint32_t>(option));
}

std::string to_string(OptionReplyType type) {
  switch (type) {
    case OptionReplyType::ack: return "NBD_REP_ACK";
    case OptionReplyType::server: return "NBD_REP_SERVER";
    case OptionReplyType::info: return "NBD_REP_INFO";
    case OptionReplyType::meta_context: return "NBD_REP_META_CONTEXT";
    case OptionReplyType::err_unsup: return "NBD_REP_ERR_UNSUP";
    case OptionReplyType::err_policy: return "NBD_REP_ERR_POLICY";
    case OptionReplyType::err_invalid: return "NBD_REP_ERR_INVALID";
    case OptionReplyType::err_platform: return "NBD_REP_ERR_PLATFORM";
    case OptionReplyType::err_tls_reqd: return "NBD_REP_ERR_TLS_REQD";
    case OptionReplyType::err_unknown: return "NBD_REP_ERR_UNKNOWN";
    case OptionReplyType::err_shutdown: return "NBD_REP_ERR_SHUTDOWN";
    case OptionReplyType::err_block_size_reqd: return "NBD_REP_ERR_BLOCK_SIZE_REQD";
    case OptionReplyType::err_too_big: return "NBD_REP_ERR_TOO_BIG";
    case OptionReplyType::err_ext_header_reqd: return "NBD_REP_ERR_EXT_HEADER_REQD";
  }
  return "option reply type " + hex(static_cast<std::uint32_t>(type));
}

std::string to_string(InfoType type) {
  switch (type) {
    case InfoType::export_info: return "INFO_EXPORT";
    case InfoType::name: return "INFO_NAME";
    case InfoType::description: return "INFO_DESCRIPTION";
    case InfoType::block_size: return "INFO_BLOCK_SIZE";
  }
  return "info type " + std::to_string(static_cast<std::uint16_t>(type));
}

std::string to_string(Command command) {
  switch (command) {
    case Command::read: return "READ";
    case Command::write: return "WRITE";
    case Command::disc: return "DISC";
    case Command::flush: return "FLUSH";
    case Command::trim: return "TRIM";
    case Command::cache: return "CACHE";
    case Command::write_zeroes: return "WRITE_ZEROES";
    case Command::block_status: return "BLOCK_STATUS";
    case Command::resize: return "RESIZE";
  }
  return "command " + std::to_string(static_cast<std::uint16_t>(command));
}

std::string to_string(ReplyType type) {
  switch (type) {
    case ReplyType::none: return "NONE";
    case ReplyType::offset_data: return "OFFSET_DATA";
    case ReplyType::offset_hole: return "OFFSET_HOLE";
    case ReplyType::block_status: return "BLOCK_STATUS";
    case ReplyType::block_status_ext: return "BLOCK_STATUS_EXT";
    case ReplyType::error: return "ERROR";
    case ReplyType::error_offset: return "ERROR_OFFSET";
  }
  return "chunk type " + hex(static_cast<std::uint16_t>(type));
}

std::string to_string(Errno error) {
  switch (error) {
    case Errno::none: return "no error";
    case Errno::eperm: return "EPERM";
    case Errno::eio: return "EIO";
    case Errno::enomem: return "ENOMEM";
    case Errno::einval: return "EINVAL";
    case Errno::enospc: return "ENOSPC";
    case Errno::eoverflow: return "EOVERFLOW";
    case Errno::enotsup: return "ENOTSUP";
    case Errno::eshutdown: return "ESHUTDOWN";
  }
  return "error " + std::to_string(static_cast<std::uint32_t>(error));
}

std::string_view describe(OptionReplyType type) {
  switch (type) {
    case OptionReplyType::ack:
    case OptionReplyType::server:
    case OptionReplyType::info:
    case OptionReplyType::meta_context: return "success";
    case OptionReplyType::err_unsup: return "option not supported";
    case OptionReplyType::err_policy: return "forbidden by server policy";
    case OptionReplyType::err_invalid: return "invalid request";
    case OptionReplyType::err_platform: return "not supported on the server's platform";
    case OptionReplyType::err_tls_reqd: return "TLS required";
    case OptionReplyType::err_unknown: return "unknown export";
    case OptionReplyType::err_shutdown: return "server is shutting down";
    case OptionReplyType::err_block_size_reqd: return "block size negotiation required";
    case OptionReplyType::err_too_big: return "request too big";
    case OptionReplyType::err_ext_header_reqd: return "extended headers required";
  }
  return is_error(type) ? "unrecognised error" : "unrecognised reply";
}

std::error_code to_error_code(Errno error) {
  switch (error) {
    case Errno::none: return {};
    case Errno::eperm: return std::make_error_code(std::errc::operation_not_permitted);
    case Errno::eio: return std::make_error_code(std::errc::io_error);
    case Errno::enomem: return std::make_error_code(std::errc::not_enough_memory);
    case Errno::einval: return std::make_error_code(std::errc::invalid_argument);
    case Errno::enospc: return std::make_error_code(std::errc::no_space_on_device);
    case Errno::eoverflow: return std::make_error_code(std::errc::value_too_large);
    case Errno::enotsup: return std::make_error_code(std::errc::not_supported);
    case Errno::eshutdown: return {ESHUTDOWN, std::generic_category()};
  }
  return std::make_error_code(std::errc::invalid_argument);
}

Errno to_nbd_errno(std::error_code code) {
  if (!code) return Errno::none;
  // Asio reports system call failures in a category of its own ("asio.system"), with
  // errno values all the same.
  const bool errno_valued = code.category() == std::generic_category() ||
                            code.category() == std::system_category() ||
                            std::string_view(code.category().name()) == "asio.system";
  if (!errno_valued) return Errno::eio;
  switch (code.value()) {
    case EPERM:
    case EACCES:
    case EROFS: return Errno::eperm;
    case EIO: return Errno::eio;
    case ENOMEM: return Errno::enomem;
    case EINVAL: return Errno::einval;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return Errno::enospc;
    case EOVERFLOW: return Errno::eoverflow;
    case ENOTSUP: return Errno::enotsup;
    case ESHUTDOWN: return Errno::eshutdown;
    default: return Errno::eio;
  }
}

}  // namespace sluice::nbd
