// Malformed-input tests for the NBD handshake messages, both directions. A decoder
// that accepts must have read the message it was given: re-encoding what it returned
// gives back the same bytes, so nothing was skipped, invented or read past the end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using namespace sluice::test;

namespace {

// A string the protocol allows: no NUL, at most 4096 bytes, any other byte.
std::string random_name(std::mt19937& rng) {
  std::string out(one_in(rng, 50) ? 4096 : pick<std::size_t>(rng, 0, 24), 'x');
  for (char& c : out) c = static_cast<char>(pick(rng, 1, 255));
  return out;
}

Option random_option(std::mt19937& rng) {
  return static_cast<Option>(one_in(rng, 4) ? static_cast<std::uint32_t>(rng()) : pick<std::uint32_t>(rng, 1, 11));
}

bool has_control_characters(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

std::vector<InfoType> random_info_requests(std::mt19937& rng) {
  std::vector<InfoType> out(pick<std::size_t>(rng, 0, 6));
  for (InfoType& t : out) t = static_cast<InfoType>(one_in(rng, 4) ? static_cast<std::uint16_t>(rng()) : pick(rng, 0, 3));
  return out;
}

std::vector<std::string> random_queries(std::mt19937& rng) {
  std::vector<std::string> out(pick<std::size_t>(rng, 0, 4));
  for (std::string& q : out) q = one_in(rng, 2) ? std::string(base_allocation_context) : random_name(rng);
  return out;
}

}  // namespace

TEST_CASE("NBD handshake fuzz: random valid messages survive encode and decode unchanged") {
  const std::uint32_t seed = 0x4a5d;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    const auto handshake_flags = static_cast<std::uint16_t>(rng());
    CHECK(decode_greeting(encode_greeting(handshake_flags)) == handshake_flags);
    const auto client_flags = static_cast<std::uint32_t>(rng() & client_flag::known);
    CHECK(decode_client_flags(encode_client_flags(client_flags), handshake_flag::known) == client_flags);

    const OptionHeader header{random_option(rng), pick<std::uint32_t>(rng, 0, max_option_length)};
    CHECK(decode_option_header(encode_option_header(header)) == header);
    const OptionReplyType reply_type = static_cast<OptionReplyType>(rng());
    const OptionReplyHeader reply{header.option, reply_type,
                                  reply_type == OptionReplyType::ack ? 0 : pick<std::uint32_t>(rng, 0, max_option_length)};
    CHECK(decode_option_reply_header(encode_option_reply_header(reply), header.option) == reply);

    const std::string name = random_name(rng);
    INFO("name: ", hex(as_bytes(name)));
    auto export_name = encode_export_name_option(name);
    REQUIRE(export_name);
    CHECK(decode_export_name_option(tail(*export_name, option_header_size)) == name);

    const std::vector<InfoType> requests = random_info_requests(rng);
    auto go = encode_info_option(one_in(rng, 2) ? Option::go : Option::info, name, requests);
    REQUIRE(go);
    CHECK(decode_info_option(tail(*go, option_header_size)) == InfoRequest{name, requests});

    const std::vector<std::string> queries = random_queries(rng);
    auto meta = encode_meta_context_option(Option::set_meta_context, name, queries);
    REQUIRE(meta);
    CHECK(decode_meta_context_option(tail(*meta, option_header_size)) == MetaContextRequest{name, queries});

    const std::string description = random_name(rng);
    auto server = encode_server_reply(name, description);
    REQUIRE(server);
    CHECK(decode_server_reply(tail(*server, option_reply_header_size)) == ExportListing{name, description});

    const ExportInfo info{random_u64(rng), static_cast<std::uint16_t>(rng())};
    auto info_reply = decode_info_reply(tail(encode_info_export(Option::go, info.size, info.transmission_flags),
                                             option_reply_header_size));
    REQUIRE(info_reply);
    REQUIRE(std::holds_alternative<ExportInfo>(*info_reply));
    CHECK(std::get<ExportInfo>(*info_reply) == info);
    CHECK(decode_export_name_reply(encode_export_name_reply(info, one_in(rng, 2))) == info);
    const BlockSizes sizes{static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()),
                           static_cast<std::uint32_t>(rng())};
    auto sizes_reply = decode_info_reply(tail(encode_info_block_size(Option::go, sizes), option_reply_header_size));
    REQUIRE(sizes_reply);
    REQUIRE(std::holds_alternative<BlockSizes>(*sizes_reply));
    CHECK(std::get<BlockSizes>(*sizes_reply).minimum == sizes.minimum);
    CHECK(std::get<BlockSizes>(*sizes_reply).preferred == sizes.preferred);
    CHECK(std::get<BlockSizes>(*sizes_reply).maximum == sizes.maximum);

    if (!name.empty()) {
      const auto id = static_cast<std::uint32_t>(rng());
      auto context = encode_meta_context_reply(Option::list_meta_context, id, name);
      REQUIRE(context);
      CHECK(decode_meta_context_reply(tail(*context, option_reply_header_size)) == MetaContext{id, name});
    }
  }
}

TEST_CASE("NBD handshake fuzz: mutated fixed-size messages are refused with a reason, or decode to their bytes") {
  const std::uint32_t seed = 0xf1eed;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    const Bytes greeting = mutate(to_vector(encode_greeting(static_cast<std::uint16_t>(rng()))), rng);
    INFO("greeting: ", hex(greeting));
    auto g = decode_greeting(greeting);
    REQUIRE(g.has_value() == (greeting.size() == greeting_size && load_be(greeting, 0, 8) == nbd_magic &&
                              load_be(greeting, 8, 8) == option_magic));
    if (accepted_else_explained(g)) CHECK(hex(encode_greeting(*g)) == hex(greeting));

    const auto offered = static_cast<std::uint16_t>(rng() & 3);
    const Bytes flags = mutate(to_vector(encode_client_flags(static_cast<std::uint32_t>(rng() & 3))), rng);
    INFO("client flags: ", hex(flags), " offered ", offered);
    auto f = decode_client_flags(flags, offered);
    // Only known flags, and only ones the server offered (the bits line up).
    REQUIRE(f.has_value() == (flags.size() == 4 && (load_be(flags, 0, 4) & ~std::uint64_t{offered}) == 0));
    if (f) CHECK(hex(encode_client_flags(*f)) == hex(flags));

    const Bytes option = mutate(to_vector(encode_option_header({random_option(rng), pick<std::uint32_t>(rng, 0, 70000)})), rng);
    INFO("option header: ", hex(option));
    auto o = decode_option_header(option);
    REQUIRE(o.has_value() == (option.size() == option_header_size && load_be(option, 0, 8) == option_magic &&
                              load_be(option, 12, 4) <= max_option_length));
    if (accepted_else_explained(o)) CHECK(hex(encode_option_header(*o)) == hex(option));

    const Option expected = random_option(rng);
    const OptionReplyType type = static_cast<OptionReplyType>(one_in(rng, 2) ? 1u : static_cast<std::uint32_t>(rng()));
    const Bytes reply = mutate(
        to_vector(encode_option_reply_header({expected, type, one_in(rng, 2) ? 0 : pick<std::uint32_t>(rng, 0, 70000)})),
        rng);
    INFO("option reply header: ", hex(reply));
    auto r = decode_option_reply_header(reply, expected);
    const bool reply_ok = reply.size() == option_reply_header_size && load_be(reply, 0, 8) == option_reply_magic &&
                          load_be(reply, 8, 4) == static_cast<std::uint32_t>(expected) &&
                          !(load_be(reply, 12, 4) == 1 && load_be(reply, 16, 4) != 0) &&
                          load_be(reply, 16, 4) <= max_option_length;
    REQUIRE(r.has_value() == reply_ok);
    if (accepted_else_explained(r)) CHECK(hex(encode_option_reply_header(*r)) == hex(reply));

    const ExportInfo info{random_u64(rng), static_cast<std::uint16_t>(rng())};
    const Bytes export_reply = mutate(encode_export_name_reply(info, one_in(rng, 2)), rng);
    auto e = decode_export_name_reply(export_reply);
    REQUIRE(e.has_value() == (export_reply.size() == 10 || export_reply.size() == 134));
    if (e) CHECK(e->size == load_be(export_reply, 0, 8));

    const Bytes oldstyle = mutate(Bytes(oldstyle_body_size), rng);
    CHECK(decode_oldstyle_body(oldstyle).has_value() == (oldstyle.size() == oldstyle_body_size));
    CHECK(is_oldstyle_greeting(std::span(greeting).first(std::min<std::size_t>(greeting.size(), 16))) ==
          (greeting.size() >= 16 && load_be(greeting, 0, 8) == nbd_magic && load_be(greeting, 8, 8) == oldstyle_magic));
  }
}

TEST_CASE("NBD handshake fuzz: mutated option data is refused with a reason, or re-encodes to the same bytes") {
  const std::uint32_t seed = 0x0970;
  int accepted = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const std::string name = random_name(rng);

    auto name_data = mutate(as_bytes(name), rng);
    auto n = decode_export_name_option(name_data);
    REQUIRE(n.has_value() == (name_data.size() <= 4096 &&
                              std::find(name_data.begin(), name_data.end(), std::byte{0}) == name_data.end()));
    if (n) CHECK(*n == as_text(name_data));

    auto go = encode_info_option(Option::go, name, random_info_requests(rng));
    REQUIRE(go);
    const Bytes info_data = mutate(tail(*go, option_header_size), rng);
    INFO("GO data: ", hex(info_data));
    auto info = decode_info_option(info_data);
    if (accepted_else_explained(info, std::errc::protocol_error)) {
      ++accepted;
      auto again = encode_info_option(Option::go, info->export_name, info->requests);
      REQUIRE(again);
      CHECK(hex(tail(*again, option_header_size)) == hex(info_data));
    }

    auto meta = encode_meta_context_option(Option::list_meta_context, name, random_queries(rng));
    REQUIRE(meta);
    const Bytes meta_data = mutate(tail(*meta, option_header_size), rng);
    INFO("META_CONTEXT data: ", hex(meta_data));
    auto request = decode_meta_context_option(meta_data);
    if (accepted_else_explained(request, std::errc::protocol_error)) {
      ++accepted;
      auto again = encode_meta_context_option(Option::list_meta_context, request->export_name, request->queries);
      REQUIRE(again);
      CHECK(hex(tail(*again, option_header_size)) == hex(meta_data));
    }
  }
  CHECK(accepted > 300);
}

TEST_CASE("NBD handshake fuzz: every proper prefix of option data or a header is refused") {
  const std::uint32_t seed = 0x9ef1;
  for (int iteration = 0; iteration < 150; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    std::string name = random_name(rng);
    name.resize(std::min<std::size_t>(name.size(), 64));  // the prefixes are many enough
    auto go = encode_info_option(Option::info, name, random_info_requests(rng));
    auto meta = encode_meta_context_option(Option::set_meta_context, name, random_queries(rng));
    REQUIRE(go);
    REQUIRE(meta);
    const Bytes go_data = tail(*go, option_header_size);
    const Bytes meta_data = tail(*meta, option_header_size);
    for (std::size_t n = 0; n < go_data.size(); ++n) {
      CAPTURE(n);
      CHECK_FALSE(decode_info_option(std::span(go_data).first(n)));
    }
    for (std::size_t n = 0; n < meta_data.size(); ++n) {
      CAPTURE(n);
      CHECK_FALSE(decode_meta_context_option(std::span(meta_data).first(n)));
    }
    const auto option = encode_option_header({random_option(rng), 0});
    const auto reply = encode_option_reply_header({Option::go, OptionReplyType::ack, 0});
    const auto greeting = encode_greeting(3);
    for (std::size_t n = 0; n < option_reply_header_size; ++n) {
      CAPTURE(n);
      if (n < option_header_size) CHECK_FALSE(decode_option_header(std::span(option).first(n)));
      CHECK_FALSE(decode_option_reply_header(std::span(reply).first(n), Option::go));
      if (n < greeting_size) CHECK_FALSE(decode_greeting(std::span(greeting).first(n)));
      if (n < client_flags_size) CHECK_FALSE(decode_client_flags(std::span(greeting).first(n), 3));
    }
  }
}

TEST_CASE("NBD handshake fuzz: mutated option reply payloads are refused, or re-encode to the same bytes") {
  const std::uint32_t seed = 0x2e91;
  int accepted = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const std::string name = random_name(rng);

    auto server = encode_server_reply(name, random_name(rng));
    REQUIRE(server);
    const Bytes listing = mutate(tail(*server, option_reply_header_size), rng);
    INFO("SERVER payload: ", hex(listing));
    auto l = decode_server_reply(listing);
    if (accepted_else_explained(l)) {
      ++accepted;
      auto again = encode_server_reply(l->name, l->description);
      REQUIRE(again);
      CHECK(hex(tail(*again, option_reply_header_size)) == hex(listing));
    }

    Bytes info_reply;
    switch (pick(rng, 0, 3)) {
      case 0: info_reply = encode_info_export(Option::go, random_u64(rng), static_cast<std::uint16_t>(rng())); break;
      case 1: info_reply = *encode_info_name(Option::go, name); break;
      case 2: info_reply = *encode_info_description(Option::go, name); break;
      default: info_reply = encode_info_block_size(Option::go, {static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()),
                                                           static_cast<std::uint32_t>(rng())}); break;
    }
    const Bytes info_payload = mutate(tail(info_reply, option_reply_header_size), rng);
    INFO("INFO payload: ", hex(info_payload));
    auto i = decode_info_reply(info_payload);
    if (accepted_else_explained(i)) {
      ++accepted;
      Bytes again;
      if (auto* e = std::get_if<ExportInfo>(&*i)) again = encode_info_export(Option::go, e->size, e->transmission_flags);
      if (auto* x = std::get_if<ExportName>(&*i)) again = *encode_info_name(Option::go, x->name);
      if (auto* d = std::get_if<ExportDescription>(&*i)) again = *encode_info_description(Option::go, d->description);
      if (auto* b = std::get_if<BlockSizes>(&*i)) again = encode_info_block_size(Option::go, *b);
      if (auto* u = std::get_if<UnknownInfo>(&*i)) {
        CHECK(static_cast<std::uint16_t>(u->type) > 3);
        CHECK(static_cast<std::uint64_t>(u->type) == load_be(info_payload, 0, 2));
      } else {
        CHECK(hex(tail(again, option_reply_header_size)) == hex(info_payload));
      }
    }

    auto context = encode_meta_context_reply(Option::set_meta_context, static_cast<std::uint32_t>(rng()), name.empty() ? "base:allocation" : name);
    REQUIRE(context);
    const Bytes context_payload = mutate(tail(*context, option_reply_header_size), rng);
    INFO("META_CONTEXT payload: ", hex(context_payload));
    auto c = decode_meta_context_reply(context_payload);
    if (accepted_else_explained(c)) {
      ++accepted;
      CHECK_FALSE(c->name.empty());
      auto again = encode_meta_context_reply(Option::set_meta_context, c->id, c->name);
      REQUIRE(again);
      CHECK(hex(tail(*again, option_reply_header_size)) == hex(context_payload));
    }

    // A refusal's text quotes the server and the export name: neither may reach a
    // terminal with control characters in it.
    const Bytes message = random_bytes(rng, 64);
    const Error refusal = option_error(random_option(rng), static_cast<OptionReplyType>(0x80000000u | rng()), message,
                                       std::string_view(as_text(random_bytes(rng, 16))));
    CHECK_FALSE(refusal.message.empty());
    CHECK_FALSE(has_control_characters(refusal.message));
  }
  CHECK(accepted > 1000);
}
