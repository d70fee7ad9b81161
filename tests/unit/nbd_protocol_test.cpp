#include <doctest/doctest.h>

#include <array>
#include <cerrno>
#include <future>
#include <ostream>  // doctest prints std::error_code through it

#include <asio/error.hpp>

#include "protocols/nbd/big_endian.hpp"
#include "protocols/nbd/protocol.hpp"
#include "protocols/nbd/wire_reader.hpp"
#include "protocols/nbd/wire_text.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using test::golden;
using test::hex;
using test::wire;

TEST_CASE("big-endian stores put the most significant byte first") {
  std::array<std::byte, 14> out{};
  std::span<std::byte, 14> s(out);
  store_u16(s.subspan<0, 2>(), 0x0102);
  store_u32(s.subspan<2, 4>(), 0x03040506);
  store_u64(s.subspan<6, 8>(), 0x0708090a0b0c0d0e);
  CHECK(hex(out) == golden("0102 03040506 0708090a0b0c0d0e"));
}

TEST_CASE("big-endian loads read what the spec's byte order says") {
  auto bytes = wire("fffe 80000001 8000000000000002");
  std::span<const std::byte, 14> s(bytes.data(), 14);
  CHECK(load_u16(s.subspan<0, 2>()) == 0xfffe);
  CHECK(load_u32(s.subspan<2, 4>()) == 0x80000001u);
  CHECK(load_u64(s.subspan<6, 8>()) == 0x8000000000000002ull);
}

TEST_CASE("appending grows a message field by field") {
  std::vector<std::byte> out;
  append_u16(out, 0xabcd);
  append_u32(out, 7);
  append_u64(out, 1);
  CHECK(hex(out) == golden("abcd 00000007 0000000000000001"));
}

TEST_CASE("the wire reader refuses to take past the end") {
  auto bytes = wire("0001 00000002 03");
  WireReader in(bytes);
  CHECK(in.u16() == 1);
  CHECK(in.u32() == 2);
  CHECK_FALSE(in.u16());           // one byte left, two wanted
  CHECK(in.remaining() == 1);      // a failed take consumes nothing
  CHECK_FALSE(in.take(2));
  auto last = in.take(1);
  REQUIRE(last);
  CHECK(hex(*last) == "03");
  CHECK(in.empty());
  CHECK_FALSE(in.u64());
}

TEST_CASE("magics are the spec's numbers") {
  // Spelled as ASCII to catch a transposed digit in the constants.
  CHECK(hex(test::text_of("NBDMAGIC")) == golden("4e42444d41474943"));
  CHECK(hex(test::text_of("IHAVEOPT")) == golden("49484156454f5054"));
  CHECK(nbd_magic == 0x4e42444d41474943ull);
  CHECK(option_magic == 0x49484156454f5054ull);
  CHECK(option_reply_magic == 0x3e889045565a9ull);
  CHECK(request_magic == 0x25609513u);
  CHECK(simple_reply_magic == 0x67446698u);
  CHECK(structured_reply_magic == 0x668e33efu);
  CHECK(default_port == 10809);
}

TEST_CASE("names for messages, known and unknown") {
  CHECK(to_string(Option::go) == "GO");
  CHECK(to_string(Option::set_meta_context) == "SET_META_CONTEXT");
  CHECK(to_string(static_cast<Option>(42)) == "option 42");
  CHECK(to_string(OptionReplyType::err_unknown) == "NBD_REP_ERR_UNKNOWN");
  CHECK(to_string(static_cast<OptionReplyType>(0x8000007f)) == "option reply type 0x8000007f");
  CHECK(to_string(InfoType::block_size) == "INFO_BLOCK_SIZE");
  CHECK(to_string(Command::write_zeroes) == "WRITE_ZEROES");
  CHECK(to_string(static_cast<Command>(99)) == "command 99");
  CHECK(to_string(ReplyType::block_status) == "BLOCK_STATUS");
  CHECK(to_string(static_cast<ReplyType>(3)) == "chunk type 0x3");
  CHECK(to_string(Errno::eio) == "EIO");
  CHECK(to_string(Errno::eshutdown) == "ESHUTDOWN");
  CHECK(to_string(static_cast<Errno>(4)) == "error 4");
  CHECK(describe(OptionReplyType::err_unknown) == "unknown export");
  CHECK(describe(static_cast<OptionReplyType>(0x80000077)) == "unrecognised error");
}

TEST_CASE("error bits mark errors, including unknown ones") {
  CHECK(is_error(OptionReplyType::err_unsup));
  CHECK(is_error(static_cast<OptionReplyType>(0x800000ff)));
  CHECK_FALSE(is_error(OptionReplyType::info));
  CHECK(is_error(ReplyType::error_offset));
  CHECK(is_error(static_cast<ReplyType>(0x8003)));
  CHECK_FALSE(is_error(ReplyType::offset_data));
}

TEST_CASE("NBD error numbers map to local errors and back") {
  CHECK(to_error_code(Errno::eio) == std::errc::io_error);
  CHECK(to_error_code(Errno::enospc) == std::errc::no_space_on_device);
  CHECK(to_error_code(Errno::eshutdown).value() == ESHUTDOWN);
  CHECK(to_error_code(Errno::enotsup) == std::errc::not_supported);
  CHECK_FALSE(to_error_code(Errno::none));
  // The spec: an unknown value reads as EINVAL.
  CHECK(to_error_code(static_cast<Errno>(4)) == std::errc::invalid_argument);

  CHECK(to_nbd_errno({}) == Errno::none);
  CHECK(to_nbd_errno(std::make_error_code(std::errc::io_error)) == Errno::eio);
  CHECK(to_nbd_errno(std::make_error_code(std::errc::read_only_file_system)) == Errno::eperm);
  CHECK(to_nbd_errno({EDQUOT, std::generic_category()}) == Errno::enospc);
  CHECK(to_nbd_errno({EFBIG, std::system_category()}) == Errno::enospc);
  // Asio's own category for failed system calls (a full disk under an io_uring write).
  CHECK(to_nbd_errno({ENOSPC, asio::error::get_system_category()}) == Errno::enospc);
  CHECK(to_nbd_errno(std::make_error_code(std::errc::invalid_argument)) == Errno::einval);
  // No NBD number for it: EIO.
  CHECK(to_nbd_errno(std::make_error_code(std::errc::no_such_device)) == Errno::eio);
  CHECK(to_nbd_errno(std::make_error_code(std::future_errc::broken_promise)) == Errno::eio);
}

TEST_CASE("a peer's text is cut at a character boundary and made printable") {
  CHECK(cut_utf8("abc", 5) == "abc");
  CHECK(cut_utf8("abcdef", 3) == "abc");
  // "é" is c3 a9: cutting after its first byte would leave half a character.
  CHECK(cut_utf8("ab\xc3\xa9", 3) == "ab");
  CHECK(printable("ok\x1b[2Jthen\n", 100) == "ok?[2Jthen?");
}
