#include <doctest/doctest.h>

#include <array>
#include <ostream>  // doctest prints std::error_code through it
#include <string>
#include <vector>

#include "engine/buffer.hpp"
#include "protocols/nbd/transmission_messages.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using test::golden;
using test::hex;
using test::wire;

namespace {

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::span<const std::byte> tail(const std::vector<std::byte>& m, std::size_t n) {
  return std::span<const std::byte>(m).subspan(n);
}

}  // namespace

// ---- Requests ----

TEST_CASE("request header: golden bytes") {
  RequestHeader h{command_flag::fua, Command::write, 0x0102030405060708, 0x100000000, 0x10000};
  CHECK(hex(encode_request_header(h)) ==
        golden("25609513 0001 0001 0102030405060708 0000000100000000 00010000"));
  RequestHeader read{command_flag::df, Command::read, 1, 512, 4096};
  CHECK(hex(encode_request_header(read)) ==
        golden("25609513 0004 0000 0000000000000001 0000000000000200 00001000"));
  RequestHeader disc{0, Command::disc, 9, 0, 0};
  CHECK(hex(encode_request_header(disc)) ==
        golden("25609513 0000 0002 0000000000000009 0000000000000000 00000000"));
}

TEST_CASE("request header goes into a buffer's headroom, right before the payload") {
  Buffer b = Buffer::allocate(4096, 64);
  std::fill(b.writable().begin(), b.writable().end(), std::byte{0xab});
  RequestHeader h{0, Command::write, 77, 8192, static_cast<std::uint32_t>(b.size())};
  encode_request_header(h,
                        std::span<std::byte, request_header_size>(b.prefix(request_header_size)));
  auto frame = b.with_prefix(request_header_size);
  CHECK(hex(frame.first(request_header_size)) ==
        golden("25609513 0000 0001 000000000000004d 0000000000002000 00001000"));
  CHECK(frame[request_header_size] == std::byte{0xab});
  auto back = decode_request_header(frame.first(request_header_size));
  REQUIRE(back);
  CHECK(*back == h);
}

TEST_CASE("request header: round trip keeps unknown commands and flags for the server") {
  RequestHeader h{0x8001, static_cast<Command>(0x42), ~0ull, ~0ull - 1, 0xffffffff};
  auto back = decode_request_header(encode_request_header(h));
  REQUIRE(back);
  CHECK(*back == h);
}

TEST_CASE("request header: bad magic and wrong sizes") {
  auto bad = decode_request_header(
      wire("25609514 0000 0000 0000000000000001 0000000000000000 00001000"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "NBD request: magic is 0x25609514, expected 0x25609513");
  auto short_one = decode_request_header(
      wire("25609513 0000 0000 0000000000000001 0000000000000000 000010"));
  REQUIRE_FALSE(short_one);
  CHECK(short_one.error().message == "NBD request header is 27 bytes, expected 28");
  CHECK_FALSE(decode_request_header({}));
}

// ---- Reply headers ----

TEST_CASE("the reply magic tells simple from structured") {
  CHECK(decode_reply_magic(wire("67446698")) == ReplyKind::simple);
  CHECK(decode_reply_magic(wire("668e33ef 0001")) == ReplyKind::structured);
  auto bad = decode_reply_magic(wire("25609513"));
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "magic is 0x25609513"));
  CHECK_FALSE(decode_reply_magic(wire("674466")));
}

TEST_CASE("simple reply header: golden bytes, round trip, malformed") {
  SimpleReplyHeader h{Errno::eio, 7};
  CHECK(hex(encode_simple_reply_header(h)) == golden("67446698 00000005 0000000000000007"));
  auto back = decode_simple_reply_header(encode_simple_reply_header(h));
  REQUIRE(back);
  CHECK(*back == h);
  auto ok = decode_simple_reply_header(wire("67446698 00000000 ffffffffffffffff"));
  REQUIRE(ok);
  CHECK(ok->error == Errno::none);
  CHECK(ok->cookie == ~0ull);
  CHECK_FALSE(decode_simple_reply_header(wire("668e33ef 00000000 0000000000000007")));
  CHECK_FALSE(decode_simple_reply_header(wire("67446698 00000000 00000000000000")));
}

TEST_CASE("structured chunk header: golden bytes and round trip") {
  ChunkHeader h{reply_flag::done, ReplyType::offset_hole, 9, 12};
  CHECK(hex(encode_chunk_header(h)) == golden("668e33ef 0001 0002 0000000000000009 0000000c"));
  auto back = decode_chunk_header(encode_chunk_header(h));
  REQUIRE(back);
  CHECK(*back == h);
  CHECK(back->done());
  CHECK(hex(encode_none_chunk(5)) == golden("668e33ef 0001 0000 0000000000000005 00000000"));
}

TEST_CASE("structured chunk header: lengths are checked against the type") {
  auto check = [](std::uint16_t flags, std::uint16_t type, std::uint32_t length) {
    return decode_chunk_header(
        encode_chunk_header({flags, static_cast<ReplyType>(type), 1, length}));
  };
  CHECK(check(1, 0, 0));
  auto none_with_data = check(1, 0, 4);
  REQUIRE_FALSE(none_with_data);
  CHECK(none_with_data.error().message == "NBD NONE chunk: length is 4, expected 0");
  auto none_not_done = check(0, 0, 0);
  REQUIRE_FALSE(none_not_done);
  CHECK(contains(none_not_done.error().message, "without the DONE flag"));

  CHECK(check(0, 1, 9));
  CHECK(check(0, 1, 0xffffffff));
  auto empty_data = check(0, 1, 8);
  REQUIRE_FALSE(empty_data);
  CHECK(empty_data.error().message == "NBD OFFSET_DATA chunk: length is 8, expected at least 9");

  CHECK(check(0, 2, 12));
  CHECK_FALSE(check(0, 2, 11));
  CHECK_FALSE(check(0, 2, 13));

  CHECK(check(1, 5, 12));
  CHECK(check(1, 5, 4 + 8 * 3));
  CHECK_FALSE(check(1, 5, 4));             // no descriptor
  CHECK_FALSE(check(1, 5, 4 + 8 + 4));     // half a descriptor
  CHECK(check(1, 5, 4 + 8 * (1u << 20)));
  auto too_many = check(1, 5, 4 + 8 * ((1u << 20) + 1));
  REQUIRE_FALSE(too_many);
  CHECK(contains(too_many.error().message, "1048577 descriptors, the limit is 1048576"));

  CHECK(check(1, 0x8001, 6));
  CHECK_FALSE(check(1, 0x8001, 5));
  CHECK(check(1, 0x8002, 14));
  CHECK_FALSE(check(1, 0x8002, 13));
  CHECK(check(1, 0x8001, 14 + 4096));
  CHECK_FALSE(check(1, 0x8001, 14 + 4097));
  CHECK(check(1, 0x8003, 6));              // an unknown error type can still be read
  CHECK_FALSE(check(1, 0x8003, 2));

  auto ext = check(1, 6, 16);
  REQUIRE_FALSE(ext);
  CHECK(contains(ext.error().message, "extended headers"));
  auto old_block_status = check(1, 3, 12);
  REQUIRE_FALSE(old_block_status);
  CHECK(contains(old_block_status.error().message, "unknown chunk type 0x3"));
  CHECK(contains(old_block_status.error().message, "BLOCK_STATUS 3"));
  CHECK_FALSE(check(1, 0x7fff, 0));
}

TEST_CASE("structured chunk header: bad magic and wrong sizes") {
  auto bad = decode_chunk_header(wire("67446698 0001 0000 0000000000000005 00000000"));
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "magic is 0x67446698"));
  CHECK_FALSE(decode_chunk_header(wire("668e33ef 0001 0000 0000000000000005 000000")));
  CHECK_FALSE(decode_chunk_header(wire("668e33ef 0001 0000 0000000000000005 00000000 00")));
}

// ---- OFFSET_DATA ----

TEST_CASE("OFFSET_DATA header: golden bytes, written in front of the data") {
  Buffer b = Buffer::allocate(4096, 64);
  std::fill(b.writable().begin(), b.writable().end(), std::byte{0x5a});
  encode_offset_data_header(0x2a, 0, 0x200, static_cast<std::uint32_t>(b.size()),
                            std::span<std::byte, offset_data_header_size>(
                                b.prefix(offset_data_header_size)));
  auto frame = b.with_prefix(offset_data_header_size);
  CHECK(hex(frame.first(offset_data_header_size)) ==
        golden("668e33ef 0000 0001 000000000000002a 00001008 0000000000000200"));

  auto header = decode_chunk_header(frame.first(chunk_header_size));
  REQUIRE(header);
  CHECK(header->type == ReplyType::offset_data);
  auto payload = frame.subspan(chunk_header_size);
  REQUIRE(payload.size() == header->length);
  auto data = decode_offset_data(payload);
  REQUIRE(data);
  CHECK(data->offset == 0x200);
  CHECK(data->data.size() == 4096);
  CHECK(data->data.data() == b.bytes().data());  // a view, not a copy

  auto range = decode_offset_data_prefix(payload.first(offset_data_prefix_size), header->length);
  REQUIRE(range);
  CHECK(*range == ContentRange{0x200, 4096});
}

TEST_CASE("OFFSET_DATA: malformed payloads") {
  CHECK_FALSE(decode_offset_data(wire("0000000000000200")));  // no data
  auto d = decode_offset_data(wire("0000000000000200 ff"));
  REQUIRE(d);
  CHECK(d->data.size() == 1);
  CHECK_FALSE(decode_offset_data(wire("00000000000002")));
  CHECK_FALSE(decode_offset_data_prefix(wire("00000000000002"), 100));
  CHECK_FALSE(decode_offset_data_prefix(wire("0000000000000200"), 8));
  auto wrap = decode_offset_data_prefix(wire("fffffffffffffff0"), 8 + 0x20);
  REQUIRE_FALSE(wrap);
  CHECK(contains(wrap.error().message, "run past the largest offset"));
}

// ---- OFFSET_HOLE ----

TEST_CASE("OFFSET_HOLE: golden bytes, round trip, malformed") {
  auto chunk = encode_offset_hole(1, reply_flag::done, 0x10000, 0x20000);
  CHECK(hex(chunk) ==
        golden("668e33ef 0001 0002 0000000000000001 0000000c 0000000000010000 00020000"));
  auto header = decode_chunk_header(std::span(chunk).first<chunk_header_size>());
  REQUIRE(header);
  auto hole = decode_offset_hole(std::span(chunk).subspan<chunk_header_size>());
  REQUIRE(hole);
  CHECK(*hole == ContentRange{0x10000, 0x20000});

  auto short_one = decode_offset_hole(wire("0000000000010000 000200"));
  REQUIRE_FALSE(short_one);
  CHECK(short_one.error().message == "NBD OFFSET_HOLE chunk: payload is 11 bytes, expected 12");
  CHECK_FALSE(decode_offset_hole(wire("0000000000010000 00020000 00")));
  auto empty = decode_offset_hole(wire("0000000000010000 00000000"));
  REQUIRE_FALSE(empty);
  CHECK(contains(empty.error().message, "is empty"));
  CHECK_FALSE(decode_offset_hole(wire("ffffffffffffff00 00001000")));
}

// ---- BLOCK_STATUS ----

TEST_CASE("BLOCK_STATUS: golden bytes and round trip") {
  const BlockStatusDescriptor ds[] = {{0x1000, 3}, {0x3000, 0}};
  auto chunk = encode_block_status(3, reply_flag::done, 1, ds);
  REQUIRE(chunk);
  CHECK(hex(*chunk) == golden("668e33ef 0001 0005 0000000000000003 00000014"
                              " 00000001 00001000 00000003 00003000 00000000"));
  auto header = decode_chunk_header(std::span<const std::byte>(*chunk).first(chunk_header_size));
  REQUIRE(header);
  auto status = decode_block_status(tail(*chunk, chunk_header_size));
  REQUIRE(status);
  CHECK(status->context_id == 1);
  CHECK(status->descriptors == std::vector<BlockStatusDescriptor>{{0x1000, 3}, {0x3000, 0}});
}

TEST_CASE("BLOCK_STATUS: malformed payloads") {
  auto odd = decode_block_status(wire("00000001 00001000 000000"));
  REQUIRE_FALSE(odd);
  CHECK(contains(odd.error().message, "payload is 11 bytes"));
  CHECK_FALSE(decode_block_status(wire("00000001")));  // no descriptor
  CHECK_FALSE(decode_block_status(wire("000001")));
  auto zero = decode_block_status(wire("00000001 00001000 00000000 00000000 00000002"));
  REQUIRE_FALSE(zero);
  CHECK(contains(zero.error().message, "descriptor 1 has length 0"));
  CHECK_FALSE(encode_block_status(1, 0, 1, {}));
  const BlockStatusDescriptor empty[] = {{0, 0}};
  CHECK_FALSE(encode_block_status(1, 0, 1, empty));
}

TEST_CASE("BLOCK_STATUS descriptors become extents from the request's offset") {
  CHECK(extent_kind(0) == ExtentKind::data);
  CHECK(extent_kind(allocation_state::hole | allocation_state::zero) == ExtentKind::hole);
  CHECK(extent_kind(allocation_state::zero) == ExtentKind::zero);
  // HOLE counts as empty with or without ZERO (as vhd-tool reads it), ZERO alone too.
  CHECK(extent_kind(allocation_state::hole) == ExtentKind::hole);
  CHECK(extent_kind(0xfffffff0) == ExtentKind::data);  // unknown bits alone mean nothing
  CHECK(extent_kind(0xfffffff0 | allocation_state::zero) == ExtentKind::zero);

  const BlockStatusDescriptor ds[] = {{4096, 3}, {8192, 2}, {512, 0}};
  auto extents = to_extents(ds, 1 << 20);
  REQUIRE(extents);
  CHECK(*extents == std::vector<Extent>{{1 << 20, 4096, ExtentKind::hole},
                                        {(1 << 20) + 4096, 8192, ExtentKind::zero},
                                        {(1 << 20) + 12288, 512, ExtentKind::data}});
  const BlockStatusDescriptor big[] = {{0xffffffff, 0}, {0xffffffff, 0}};
  CHECK_FALSE(to_extents(big, ~0ull - 0x100000000ull));
}

// ---- Error chunks ----

TEST_CASE("ERROR and ERROR_OFFSET: golden bytes and round trips") {
  auto error = encode_error_chunk(4, reply_flag::done, Errno::eio, "bad");
  CHECK(hex(error) == golden("668e33ef 0001 8001 0000000000000004 00000009 00000005 0003 626164"));
  auto e = decode_error_chunk(ReplyType::error, tail(error, chunk_header_size));
  REQUIRE(e);
  CHECK(*e == ErrorChunk{Errno::eio, "bad", std::nullopt});

  auto at = encode_error_chunk(4, 0, Errno::enospc, "", 0x400);
  CHECK(hex(at) == golden("668e33ef 0000 8002 0000000000000004 0000000e 0000001c 0000"
                          " 0000000000000400"));
  auto eo = decode_error_chunk(ReplyType::error_offset, tail(at, chunk_header_size));
  REQUIRE(eo);
  CHECK(*eo == ErrorChunk{Errno::enospc, "", 0x400});

  // An error chunk always carries an error.
  auto none = encode_error_chunk(1, 0, Errno::none, "");
  CHECK(hex(none) == golden("668e33ef 0000 8001 0000000000000001 00000006 00000005 0000"));
  auto long_message = encode_error_chunk(1, 0, Errno::eio, std::string(5000, 'm'));
  CHECK(long_message.size() == chunk_header_size + 6 + 4096);
}

TEST_CASE("error chunks: messages that do not fit are refused") {
  auto too_long = decode_error_chunk(ReplyType::error, wire("00000005 0004 626164"));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().message ==
        "NBD ERROR chunk: message length 4 exceeds the 3 bytes the payload leaves for it");
  // ERROR_OFFSET: the offset must still fit after the message.
  auto no_room = decode_error_chunk(ReplyType::error_offset,
                                    wire("00000005 0003 626164 00000000000004"));
  REQUIRE_FALSE(no_room);
  CHECK(contains(no_room.error().message, "message length 3 exceeds the 2 bytes"));
  CHECK_FALSE(decode_error_chunk(ReplyType::error_offset,
                                 wire("00000005 0000 0000000000000400 00")));
  CHECK_FALSE(decode_error_chunk(ReplyType::error, wire("00000005 00")));
  CHECK_FALSE(decode_error_chunk(ReplyType::error_offset, wire("00000005 0000 00000000")));
  auto zero = decode_error_chunk(ReplyType::error, wire("00000000 0000"));
  REQUIRE_FALSE(zero);
  CHECK(contains(zero.error().message, "error number 0"));
  CHECK_FALSE(decode_error_chunk(ReplyType::offset_data, wire("00000005 0000")));
}

TEST_CASE("error chunks: unknown error types and extra fields") {
  auto unknown = decode_error_chunk(static_cast<ReplyType>(0x8005),
                                    wire("00000016 0002 6869 0102030405"));
  REQUIRE(unknown);
  CHECK(unknown->error == Errno::einval);
  CHECK(unknown->message == "hi");
  CHECK_FALSE(unknown->offset);
  // ERROR may have bytes after its message; they are skipped.
  CHECK(decode_error_chunk(ReplyType::error, wire("00000005 0000 ff")));
  // An unknown error number is kept; mapping it to EINVAL happens at to_error_code().
  auto odd = decode_error_chunk(ReplyType::error, wire("0000007f 0000"));
  REQUIRE(odd);
  CHECK(odd->error == static_cast<Errno>(0x7f));
}
