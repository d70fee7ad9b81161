#include <doctest/doctest.h>

#include <algorithm>
#include <ostream>  // doctest prints std::error_code through it
#include <string>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"
#include "protocols/nbd/wire_text.hpp"
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

// The header of a whole encoded message, and what follows it.
std::span<const std::byte> head(const std::vector<std::byte>& m, std::size_t n) {
  return std::span<const std::byte>(m).first(n);
}
std::span<const std::byte> tail(const std::vector<std::byte>& m, std::size_t n) {
  return std::span<const std::byte>(m).subspan(n);
}

}  // namespace

// ---- Greeting and client flags ----

TEST_CASE("greeting: golden bytes and round trip") {
  auto g = encode_greeting(handshake_flag::fixed_newstyle | handshake_flag::no_zeroes);
  CHECK(hex(g) == golden("4e42444d41474943 49484156454f5054 0003"));
  auto flags = decode_greeting(g);
  REQUIRE(flags);
  CHECK(*flags == 3);
}

TEST_CASE("greeting: not NBD, oldstyle, truncated") {
  auto bad_magic = decode_greeting(wire("4e42444d41474944 49484156454f5054 0003"));
  REQUIRE_FALSE(bad_magic);
  CHECK(bad_magic.error().code == std::errc::protocol_error);
  CHECK(contains(bad_magic.error().message, "not an NBD server"));

  auto oldstyle = decode_greeting(wire("4e42444d41474943 0000420281861253 0000"));
  REQUIRE_FALSE(oldstyle);
  CHECK(oldstyle.error().code == std::errc::not_supported);
  CHECK(contains(oldstyle.error().message, "oldstyle"));

  auto bad_second = decode_greeting(wire("4e42444d41474943 49484156454f5055 0001"));
  REQUIRE_FALSE(bad_second);
  CHECK(contains(bad_second.error().message, "IHAVEOPT"));

  auto short_one = decode_greeting(wire("4e42444d41474943 49484156454f5054 00"));
  REQUIRE_FALSE(short_one);
  CHECK(short_one.error().message == "NBD greeting is 17 bytes, expected 18");
  CHECK_FALSE(decode_greeting({}));
}

TEST_CASE("client flags: golden bytes, offered flags accepted") {
  auto c = encode_client_flags(client_flag::fixed_newstyle | client_flag::no_zeroes);
  CHECK(hex(c) == golden("00000003"));
  auto flags = decode_client_flags(c, handshake_flag::fixed_newstyle | handshake_flag::no_zeroes);
  REQUIRE(flags);
  CHECK(*flags == 3);
  CHECK(decode_client_flags(wire("00000000"), handshake_flag::fixed_newstyle));
}

TEST_CASE("client flags: unknown or unoffered flags are refused") {
  auto unknown = decode_client_flags(wire("00000005"), handshake_flag::known);
  REQUIRE_FALSE(unknown);
  CHECK(contains(unknown.error().message, "unknown flags 0x4"));
  auto unoffered = decode_client_flags(wire("00000003"), handshake_flag::fixed_newstyle);
  REQUIRE_FALSE(unoffered);
  CHECK(contains(unoffered.error().message, "NO_ZEROES"));
  CHECK_FALSE(decode_client_flags(wire("000003"), handshake_flag::known));
}

// ---- Option requests ----

TEST_CASE("options without data: golden bytes") {
  CHECK(hex(encode_option(Option::abort)) == golden("49484156454f5054 00000002 00000000"));
  CHECK(hex(encode_option(Option::list)) == golden("49484156454f5054 00000003 00000000"));
  CHECK(hex(encode_option(Option::starttls)) == golden("49484156454f5054 00000005 00000000"));
  CHECK(hex(encode_option(Option::structured_reply)) ==
        golden("49484156454f5054 00000008 00000000"));
}

TEST_CASE("option header: round trip, bad magic, oversized, short") {
  auto h = encode_option_header({Option::go, 0x20});
  CHECK(hex(h) == golden("49484156454f5054 00000007 00000020"));
  auto back = decode_option_header(h);
  REQUIRE(back);
  CHECK(*back == OptionHeader{Option::go, 0x20});

  CHECK_FALSE(decode_option_header(wire("49484156454f5055 00000007 00000000")));
  auto huge = decode_option_header(wire("49484156454f5054 00000007 00010001"));
  REQUIRE_FALSE(huge);
  CHECK(contains(huge.error().message, "65537 bytes"));
  CHECK(decode_option_header(wire("49484156454f5054 00000007 00010000")));  // the limit itself
  CHECK_FALSE(decode_option_header(wire("49484156454f5054 00000007 000000")));
}

TEST_CASE("options that carry no data must not carry any") {
  CHECK(check_no_option_data({Option::list, 0}));
  auto bad = check_no_option_data({Option::list, 5});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "NBD LIST carries 5 bytes of data, expected none");
}

TEST_CASE("EXPORT_NAME option: golden bytes and round trip") {
  auto m = encode_export_name_option("disk");
  REQUIRE(m);
  CHECK(hex(*m) == golden("49484156454f5054 00000001 00000004 6469736b"));
  auto name = decode_export_name_option(tail(*m, option_header_size));
  REQUIRE(name);
  CHECK(*name == "disk");
  auto empty = encode_export_name_option("");
  REQUIRE(empty);
  CHECK(hex(*empty) == golden("49484156454f5054 00000001 00000000"));
}

TEST_CASE("export names: too long or with NUL are refused both ways") {
  CHECK(encode_export_name_option(std::string(4096, 'a')));
  auto long_name = encode_export_name_option(std::string(4097, 'a'));
  REQUIRE_FALSE(long_name);
  CHECK(long_name.error().message == "export name is 4097 bytes, the NBD limit is 4096");
  CHECK_FALSE(encode_export_name_option(std::string("a\0b", 3)));
  CHECK_FALSE(decode_export_name_option(wire("610062")));
  auto received = decode_export_name_option(test::text_of(std::string(4097, 'a')));
  REQUIRE_FALSE(received);
  CHECK(received.error().code == std::errc::protocol_error);
}

TEST_CASE("GO option: golden bytes and round trip") {
  const InfoType wanted[] = {InfoType::name, InfoType::block_size};
  auto m = encode_info_option(Option::go, "x", wanted);
  REQUIRE(m);
  CHECK(hex(*m) == golden("49484156454f5054 00000007 0000000b"
                          " 00000001 78 0002 0001 0003"));
  auto header = decode_option_header(head(*m, option_header_size));
  REQUIRE(header);
  CHECK(header->length == m->size() - option_header_size);
  auto request = decode_info_option(tail(*m, option_header_size));
  REQUIRE(request);
  CHECK(request->export_name == "x");
  CHECK(request->requests == std::vector<InfoType>{InfoType::name, InfoType::block_size});

  auto info = encode_info_option(Option::info, "", {});
  REQUIRE(info);
  CHECK(hex(*info) == golden("49484156454f5054 00000006 00000006 00000000 0000"));
}

TEST_CASE("GO option data: every malformation is caught") {
  SUBCASE("too short for the name length") {
    auto r = decode_info_option(wire("000000"));
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "too short for the name length"));
  }
  SUBCASE("name longer than the data") {
    auto r = decode_info_option(wire("00000005 7878 0000"));
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "export name length 5 exceeds the 4 bytes"));
  }
  SUBCASE("huge name length does not over-read") {
    CHECK_FALSE(decode_info_option(wire("ffffffff 78")));
  }
  SUBCASE("no request count") {
    CHECK_FALSE(decode_info_option(wire("00000001 78 00")));
  }
  SUBCASE("count promises more than follows") {
    auto r = decode_info_option(wire("00000001 78 0002 0001"));
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "2 information requests need 4 bytes, 2 follow"));
  }
  SUBCASE("trailing bytes after the requests") {
    CHECK_FALSE(decode_info_option(wire("00000001 78 0001 0001 ff")));
  }
  SUBCASE("name with NUL") {
    CHECK_FALSE(decode_info_option(wire("00000002 7800 0000")));
  }
}

TEST_CASE("SET_META_CONTEXT option: golden bytes and round trip") {
  const std::vector<std::string> queries = {"base:allocation"};
  auto m = encode_meta_context_option(Option::set_meta_context, "", queries);
  REQUIRE(m);
  CHECK(hex(*m) == golden("49484156454f5054 0000000a 0000001b"
                          " 00000000 00000001 0000000f 626173653a616c6c6f636174696f6e"));
  auto request = decode_meta_context_option(tail(*m, option_header_size));
  REQUIRE(request);
  CHECK(*request == MetaContextRequest{"", {"base:allocation"}});

  auto list = encode_meta_context_option(Option::list_meta_context, "e", {});
  REQUIRE(list);
  CHECK(hex(*list) == golden("49484156454f5054 00000009 00000009 00000001 65 00000000"));
  auto listed = decode_meta_context_option(tail(*list, option_header_size));
  REQUIRE(listed);
  CHECK(*listed == MetaContextRequest{"e", {}});

  const std::vector<std::string> two = {"base:allocation", "qemu:dirty-bitmap:b"};
  auto m2 = encode_meta_context_option(Option::set_meta_context, "disk", two);
  REQUIRE(m2);
  auto back = decode_meta_context_option(tail(*m2, option_header_size));
  REQUIRE(back);
  CHECK(back->queries == two);
}

TEST_CASE("meta context option data: every malformation is caught") {
  SUBCASE("count larger than the data could hold is refused before allocating") {
    auto r = decode_meta_context_option(wire("00000000 ffffffff"));
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "4294967295 queries cannot fit in the 0 bytes"));
  }
  SUBCASE("query longer than the data") {
    auto r = decode_meta_context_option(wire("00000000 00000001 00000010 6162"));
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "query 0 is 16 bytes, only 2 follow"));
  }
  SUBCASE("missing count") {
    CHECK_FALSE(decode_meta_context_option(wire("00000000 0000")));
  }
  SUBCASE("bytes after the last query") {
    CHECK_FALSE(decode_meta_context_option(wire("00000000 00000001 00000001 61 00")));
  }
  SUBCASE("name length beyond the data") {
    CHECK_FALSE(decode_meta_context_option(wire("00000009 61")));
  }
  SUBCASE("a query too long to encode") {
    const std::vector<std::string> q = {std::string(4097, 'q')};
    CHECK_FALSE(encode_meta_context_option(Option::set_meta_context, "", q));
  }
}

// ---- Option replies ----

TEST_CASE("ACK: golden bytes and header round trip") {
  auto ack = encode_ack(Option::go);
  CHECK(hex(ack) == golden("0003e889045565a9 00000007 00000001 00000000"));
  auto h = decode_option_reply_header(ack, Option::go);
  REQUIRE(h);
  CHECK(*h == OptionReplyHeader{Option::go, OptionReplyType::ack, 0});
}

TEST_CASE("option reply header: wrong option, bad magic, ACK with data, oversized, short") {
  auto wrong = decode_option_reply_header(
      wire("0003e889045565a9 00000008 00000001 00000000"), Option::go);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == "NBD option reply is for STRUCTURED_REPLY while GO was sent");

  CHECK_FALSE(decode_option_reply_header(wire("0003e889045565aa 00000007 00000001 00000000"),
                                         Option::go));
  auto ack_data = decode_option_reply_header(
      wire("0003e889045565a9 00000007 00000001 00000004"), Option::go);
  REQUIRE_FALSE(ack_data);
  CHECK(contains(ack_data.error().message, "ACK to GO carries 4 bytes"));

  auto huge = decode_option_reply_header(wire("0003e889045565a9 00000007 00000003 ffffffff"),
                                         Option::go);
  REQUIRE_FALSE(huge);
  CHECK(contains(huge.error().message, "4294967295 bytes, the limit is 65536"));

  CHECK_FALSE(decode_option_reply_header(wire("0003e889045565a9 00000007 00000001"), Option::go));
}

TEST_CASE("SERVER reply: golden bytes, round trip, malformed") {
  auto m = encode_server_reply("a", "desc");
  REQUIRE(m);
  CHECK(hex(*m) == golden("0003e889045565a9 00000003 00000002 00000009 00000001 61 64657363"));
  auto listing = decode_server_reply(tail(*m, option_reply_header_size));
  REQUIRE(listing);
  CHECK(*listing == ExportListing{"a", "desc"});

  auto bare = decode_server_reply(wire("00000000"));
  REQUIRE(bare);
  CHECK(*bare == ExportListing{"", ""});

  auto too_long = decode_server_reply(wire("00000004 616263"));
  REQUIRE_FALSE(too_long);
  CHECK(contains(too_long.error().message, "SERVER name length 4 exceeds the 3 bytes"));
  CHECK_FALSE(decode_server_reply(wire("000000")));
}

TEST_CASE("INFO replies: golden bytes for each type") {
  CHECK(hex(encode_info_export(Option::go, 0x100000, 0x0109)) ==
        golden("0003e889045565a9 00000007 00000003 0000000c 0000 0000000000100000 0109"));
  auto name = encode_info_name(Option::go, "x");
  REQUIRE(name);
  CHECK(hex(*name) == golden("0003e889045565a9 00000007 00000003 00000003 0001 78"));
  auto description = encode_info_description(Option::info, "hi");
  REQUIRE(description);
  CHECK(hex(*description) == golden("0003e889045565a9 00000006 00000003 00000004 0002 6869"));
  CHECK(hex(encode_info_block_size(Option::go, BlockSizes{1, 4096, 32u << 20})) ==
        golden("0003e889045565a9 00000007 00000003 0000000e 0003 00000001 00001000 02000000"));
}

TEST_CASE("INFO replies: round trips") {
  auto decode_payload = [](const std::vector<std::byte>& m) {
    auto h = decode_option_reply_header(head(m, option_reply_header_size), Option::go);
    REQUIRE(h);
    CHECK(h->type == OptionReplyType::info);
    CHECK(h->length == m.size() - option_reply_header_size);
    return decode_info_reply(tail(m, option_reply_header_size));
  };
  auto e = decode_payload(encode_info_export(Option::go, 5ull << 40, 0x0003));
  REQUIRE(e);
  CHECK(std::get<ExportInfo>(*e) == ExportInfo{5ull << 40, 0x0003});
  auto n = decode_payload(*encode_info_name(Option::go, "disk"));
  REQUIRE(n);
  CHECK(std::get<ExportName>(*n).name == "disk");
  auto d = decode_payload(*encode_info_description(Option::go, "a disk"));
  REQUIRE(d);
  CHECK(std::get<ExportDescription>(*d).description == "a disk");
  auto b = decode_payload(encode_info_block_size(Option::go, BlockSizes{512, 65536, 1u << 24}));
  REQUIRE(b);
  const auto& sizes = std::get<BlockSizes>(*b);
  CHECK(sizes.minimum == 512);
  CHECK(sizes.preferred == 65536);
  CHECK(sizes.maximum == 1u << 24);
}

TEST_CASE("INFO replies: lengths must match the type") {
  auto short_size = decode_info_reply(wire("0003 00000200 00001000"));
  REQUIRE_FALSE(short_size);
  CHECK(short_size.error().message ==
        "NBD option reply: INFO_BLOCK_SIZE payload is 10 bytes, expected 14");
  CHECK_FALSE(decode_info_reply(wire("0003 00000200 00001000 02000000 00")));
  auto short_export = decode_info_reply(wire("0000 0000000000100000"));
  REQUIRE_FALSE(short_export);
  CHECK(short_export.error().message ==
        "NBD option reply: INFO_EXPORT payload is 10 bytes, expected 12");
  CHECK_FALSE(decode_info_reply(wire("0000 0000000000100000 0001 00")));
  CHECK_FALSE(decode_info_reply(wire("00")));
  CHECK_FALSE(decode_info_reply({}));
  CHECK_FALSE(decode_info_reply(wire("0001 6100")));  // NUL in a name
}

TEST_CASE("INFO replies of unknown types are reported, not refused") {
  auto r = decode_info_reply(wire("0009 010203"));
  REQUIRE(r);
  CHECK(std::get<UnknownInfo>(*r).type == static_cast<InfoType>(9));
}

TEST_CASE("META_CONTEXT reply: golden bytes, round trip, malformed") {
  auto m = encode_meta_context_reply(Option::set_meta_context, 1, "base:allocation");
  REQUIRE(m);
  CHECK(hex(*m) == golden("0003e889045565a9 0000000a 00000004 00000013"
                          " 00000001 626173653a616c6c6f636174696f6e"));
  auto context = decode_meta_context_reply(tail(*m, option_reply_header_size));
  REQUIRE(context);
  CHECK(*context == MetaContext{1, "base:allocation"});
  CHECK_FALSE(decode_meta_context_reply(wire("000001")));
  CHECK_FALSE(decode_meta_context_reply(wire("00000001")));  // no name
}

TEST_CASE("error reply: golden bytes; long messages are cut, not refused") {
  CHECK(hex(encode_error_reply(Option::go, OptionReplyType::err_unknown, "no")) ==
        golden("0003e889045565a9 00000007 80000006 00000002 6e6f"));
  CHECK(hex(encode_error_reply(Option::starttls, OptionReplyType::err_policy)) ==
        golden("0003e889045565a9 00000005 80000002 00000000"));
  auto long_one = encode_error_reply(Option::go, OptionReplyType::err_invalid,
                                     std::string(5000, 'x'));
  CHECK(long_one.size() == option_reply_header_size + 4096);
}

TEST_CASE("option errors become messages a person can act on") {
  auto message = test::text_of("no such export: x");
  Error e = option_error(Option::go, OptionReplyType::err_unknown, message, "x");
  CHECK(e.message ==
        "server refused GO for export 'x': unknown export (NBD_REP_ERR_UNKNOWN): "
        "no such export: x");
  CHECK(e.code == std::errc::no_such_file_or_directory);

  Error tls = option_error(Option::go, OptionReplyType::err_tls_reqd, {}, "");
  CHECK(tls.message == "server refused GO for export '': TLS required (NBD_REP_ERR_TLS_REQD)");
  CHECK(tls.code == std::errc::permission_denied);

  Error unsup = option_error(Option::structured_reply, OptionReplyType::err_unsup, {}, "x");
  CHECK(unsup.message ==
        "server refused STRUCTURED_REPLY: option not supported (NBD_REP_ERR_UNSUP)");
  CHECK(unsup.code == std::errc::not_supported);

  Error policy = option_error(Option::starttls, OptionReplyType::err_policy, {}, "");
  CHECK(policy.message == "server refused STARTTLS: forbidden by server policy (NBD_REP_ERR_POLICY)");
  CHECK(policy.code == std::errc::permission_denied);

  Error block_size = option_error(Option::go, OptionReplyType::err_block_size_reqd, {}, "x");
  CHECK(block_size.message ==
        "server refused GO for export 'x': block size negotiation required (NBD_REP_ERR_BLOCK_SIZE_REQD)");
  CHECK(block_size.code == std::errc::invalid_argument);

  // Whatever the server sends, nothing unprintable reaches the message.
  auto nasty = test::text_of("bad\x1b]0;pwned\x07");
  Error sanitised = option_error(Option::list, static_cast<OptionReplyType>(0x80000042), nasty);
  CHECK(sanitised.message ==
        "server refused LIST: unrecognised error (option reply type 0x80000042): bad?]0;pwned?");
  CHECK(sanitised.code == std::errc::protocol_error);
}

// ---- EXPORT_NAME reply ----

TEST_CASE("EXPORT_NAME reply: golden bytes with and without the zeroes") {
  auto short_form = encode_export_name_reply({0x100000, 0x0003}, true);
  CHECK(hex(short_form) == golden("0000000000100000 0003"));
  auto long_form = encode_export_name_reply({0x100000, 0x0003}, false);
  REQUIRE(long_form.size() == 134);
  CHECK(hex(head(long_form, 10)) == golden("0000000000100000 0003"));
  CHECK(std::all_of(long_form.begin() + 10, long_form.end(),
                    [](std::byte b) { return b == std::byte{0}; }));

  auto a = decode_export_name_reply(short_form);
  REQUIRE(a);
  CHECK(*a == ExportInfo{0x100000, 0x0003});
  auto b = decode_export_name_reply(long_form);
  REQUIRE(b);
  CHECK(*b == ExportInfo{0x100000, 0x0003});
  CHECK_FALSE(decode_export_name_reply(head(long_form, 9)));
  CHECK_FALSE(decode_export_name_reply(head(long_form, 11)));
}

TEST_CASE("an INFO request too large for a server to accept is not encoded") {
  std::vector<InfoType> many(40000, InfoType::name);
  auto r = encode_info_option(Option::go, "x", many);
  REQUIRE_FALSE(r);
  CHECK(contains(r.error().message, "40000 information requests is too large"));
}

// ---- Oldstyle ----

TEST_CASE("oldstyle: the greeting is recognised; size and transmission flags from the body") {
  CHECK(is_oldstyle_greeting(wire("4e42444d41474943 0000420281861253")));
  CHECK_FALSE(is_oldstyle_greeting(wire("4e42444d41474943 49484156454f5054")));
  CHECK_FALSE(is_oldstyle_greeting(wire("4e42444d41474943 00004202818612")));

  // 1 GiB; global flags 0x0001 in the high half are not transmission flags.
  auto body = wire("0000000040000000 0001 0d6d");
  body.resize(oldstyle_body_size);
  auto info = decode_oldstyle_body(body);
  REQUIRE(info);
  CHECK(*info == ExportInfo{1ull << 30, 0x0d6d});
  auto short_body = decode_oldstyle_body(head(body, 135));
  REQUIRE_FALSE(short_body);
  CHECK(contains(short_body.error().message, "136"));
}
