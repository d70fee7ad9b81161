// Malformed-input tests for the NBD transmission decoders (request and reply headers,
// structured reply payloads) and the server's request checks. Each decoder's
// acceptance rule is restated here from its header's documentation, without sharing
// its arithmetic, and compared both ways: whatever it accepts obeys the rule, and
// whatever obeys the rule is accepted.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <span>
#include <string>
#include <vector>

#include "protocols/nbd/server/request_checks.hpp"
#include "protocols/nbd/transmission_messages.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using namespace sluice::test;

namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

bool fits_below_2_64(std::uint64_t offset, std::uint64_t length) { return offset <= u64_max - length; }

std::uint64_t edgy_u64(std::mt19937& rng) {
  switch (pick(rng, 0, 3)) {
    case 0: return pick<std::uint64_t>(rng, 0, 1u << 20);
    case 1: return u64_max - pick<std::uint64_t>(rng, 0, 1u << 20);
    default: return random_u64(rng);
  }
}

std::uint32_t edgy_u32(std::mt19937& rng) {
  switch (pick(rng, 0, 3)) {
    case 0: return pick<std::uint32_t>(rng, 0, 1u << 16);
    case 1: return 0xffffffffu - pick<std::uint32_t>(rng, 0, 1u << 16);
    default: return static_cast<std::uint32_t>(rng());
  }
}

RequestHeader random_request(std::mt19937& rng) {
  RequestHeader r;
  r.flags = one_in(rng, 4) ? static_cast<std::uint16_t>(rng()) : static_cast<std::uint16_t>(rng() & 0x1f);
  r.command = static_cast<Command>(one_in(rng, 8) ? static_cast<std::uint16_t>(rng()) : pick<std::uint16_t>(rng, 0, 8));
  r.cookie = random_u64(rng);
  r.offset = edgy_u64(rng);
  r.length = edgy_u32(rng);
  return r;
}

// The rule decode_chunk_header documents: which lengths suit which chunk type.
bool chunk_length_suits_type(const ChunkHeader& h) {
  const std::uint32_t type = static_cast<std::uint32_t>(h.type);
  if (type == 0) return h.length == 0 && (h.flags & 1) != 0;
  if (type == 1) return h.length >= 9;
  if (type == 2) return h.length == 12;
  if (type == 5) return h.length >= 12 && (h.length - 4) % 8 == 0 && (h.length - 4) / 8 <= (1u << 20);
  if (type == 0x8002) return h.length >= 14 && h.length <= 14 + 4096;
  if (type & 0x8000) return h.length >= 6 && h.length <= 14 + 4096;
  return false;  // unknown non-error types, and BLOCK_STATUS_EXT without extended headers
}

ChunkHeader random_valid_chunk_header(std::mt19937& rng) {
  ChunkHeader h;
  h.flags = static_cast<std::uint16_t>(one_in(rng, 3) ? rng() : rng() & 1);
  h.cookie = random_u64(rng);
  switch (pick(rng, 0, 5)) {
    case 0:
      h.type = ReplyType::none;
      h.flags |= reply_flag::done;
      h.length = 0;
      break;
    case 1:
      h.type = ReplyType::offset_data;
      h.length = one_in(rng, 4) ? 9 : pick<std::uint32_t>(rng, 9, 0xffffffffu);
      break;
    case 2:
      h.type = ReplyType::offset_hole;
      h.length = 12;
      break;
    case 3:
      h.type = ReplyType::block_status;
      h.length = 4 + 8 * pick<std::uint32_t>(rng, 1, 1u << 20);
      break;
    case 4:
      h.type = ReplyType::error_offset;
      h.length = pick<std::uint32_t>(rng, 14, max_error_chunk_length);
      break;
    default:
      h.type = one_in(rng, 2) ? ReplyType::error : static_cast<ReplyType>(0x8000u | (rng() & 0x7fff));
      h.length = pick<std::uint32_t>(rng, h.type == ReplyType::error_offset ? 14 : 6, max_error_chunk_length);
      break;
  }
  return h;
}

bool is_prefix_of(const Bytes& prefix, std::span<const std::byte> whole) {
  return prefix.size() <= whole.size() && std::equal(prefix.begin(), prefix.end(), whole.begin());
}

}  // namespace

TEST_CASE("NBD transmission fuzz: random headers survive encode and decode unchanged") {
  const std::uint32_t seed = 0x7e0de;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    // Unknown commands and flags must survive too: the server answers them with EINVAL.
    const RequestHeader request = random_request(rng);
    auto decoded_request = decode_request_header(encode_request_header(request));
    REQUIRE(decoded_request);
    CHECK(*decoded_request == request);

    const SimpleReplyHeader simple{static_cast<Errno>(rng()), random_u64(rng)};
    auto simple_bytes = encode_simple_reply_header(simple);
    auto kind = decode_reply_magic(simple_bytes);
    REQUIRE(kind);
    CHECK(*kind == ReplyKind::simple);
    auto decoded_simple = decode_simple_reply_header(simple_bytes);
    REQUIRE(decoded_simple);
    CHECK(*decoded_simple == simple);

    const ChunkHeader chunk = random_valid_chunk_header(rng);
    CAPTURE(chunk.length);
    auto chunk_bytes = encode_chunk_header(chunk);
    auto structured = decode_reply_magic(chunk_bytes);
    REQUIRE(structured);
    CHECK(*structured == ReplyKind::structured);
    auto decoded_chunk = decode_chunk_header(chunk_bytes);
    REQUIRE(decoded_chunk);
    CHECK(*decoded_chunk == chunk);
  }
}

TEST_CASE("NBD transmission fuzz: mutated headers are refused with a reason, or decode to exactly their bytes") {
  const std::uint32_t seed = 0xbad4ead;
  int accepted_chunks = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    const Bytes request = mutate(to_vector(encode_request_header(random_request(rng))), rng);
    INFO("request: ", hex(request));
    auto r = decode_request_header(request);
    const bool request_ok = request.size() == request_header_size && load_be(request, 0, 4) == request_magic;
    REQUIRE(r.has_value() == request_ok);
    if (accepted_else_explained(r, std::errc::protocol_error)) {
      CHECK(hex(encode_request_header(*r)) == hex(request));
    }

    const Bytes simple =
        mutate(to_vector(encode_simple_reply_header({static_cast<Errno>(rng()), random_u64(rng)})), rng);
    INFO("simple reply: ", hex(simple));
    auto s = decode_simple_reply_header(simple);
    REQUIRE(s.has_value() == (simple.size() == simple_reply_header_size && load_be(simple, 0, 4) == simple_reply_magic));
    if (accepted_else_explained(s)) CHECK(hex(encode_simple_reply_header(*s)) == hex(simple));

    auto kind = decode_reply_magic(simple);
    if (simple.size() < reply_magic_size) {
      CHECK_FALSE(kind);
    } else {
      const std::uint64_t magic = load_be(simple, 0, 4);
      REQUIRE(kind.has_value() == (magic == simple_reply_magic || magic == structured_reply_magic));
      if (kind) CHECK((*kind == ReplyKind::simple) == (magic == simple_reply_magic));
    }

    const Bytes chunk = mutate(to_vector(encode_chunk_header(random_valid_chunk_header(rng))), rng);
    INFO("chunk header: ", hex(chunk));
    auto c = decode_chunk_header(chunk);
    if (chunk.size() != chunk_header_size || load_be(chunk, 0, 4) != structured_reply_magic) {
      REQUIRE_FALSE(c);
      CHECK_FALSE(c.error().message.empty());
      continue;
    }
    ChunkHeader raw;
    raw.flags = static_cast<std::uint16_t>(load_be(chunk, 4, 2));
    raw.type = static_cast<ReplyType>(load_be(chunk, 6, 2));
    raw.cookie = load_be(chunk, 8, 8);
    raw.length = static_cast<std::uint32_t>(load_be(chunk, 16, 4));
    CAPTURE(raw.length);
    CAPTURE(static_cast<unsigned>(raw.type));
    REQUIRE(c.has_value() == chunk_length_suits_type(raw));
    if (accepted_else_explained(c, std::errc::protocol_error)) {
      CHECK(*c == raw);
      ++accepted_chunks;
    }
  }
  CHECK(accepted_chunks > 300);
}

TEST_CASE("NBD transmission fuzz: every proper prefix of a header is refused") {
  const std::uint32_t seed = 0x9ef1c5;
  for (int iteration = 0; iteration < 300; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const auto request = encode_request_header(random_request(rng));
    const auto simple = encode_simple_reply_header({static_cast<Errno>(rng()), random_u64(rng)});
    const auto chunk = encode_chunk_header(random_valid_chunk_header(rng));
    for (std::size_t n = 0; n < request_header_size; ++n) {
      CAPTURE(n);
      CHECK_FALSE(decode_request_header(std::span(request).first(n)));
      if (n < simple_reply_header_size) CHECK_FALSE(decode_simple_reply_header(std::span(simple).first(n)));
      if (n < chunk_header_size) CHECK_FALSE(decode_chunk_header(std::span(chunk).first(n)));
      if (n < reply_magic_size) CHECK_FALSE(decode_reply_magic(std::span(chunk).first(n)));
      if (n < offset_data_prefix_size)
        CHECK_FALSE(decode_offset_data_prefix(std::span(chunk).first(n), 4096));
    }
  }
}

TEST_CASE("NBD transmission fuzz: mutated structured reply payloads are refused or decode consistently") {
  const std::uint32_t seed = 0x5a71;
  int accepted = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    // OFFSET_DATA, whole: the data view lies inside the payload, right after the offset.
    {
      Bytes payload(8);
      std::array<std::byte, offset_data_header_size> header{};
      encode_offset_data_header(0, 0, edgy_u64(rng), 1, header);
      std::copy(header.begin() + chunk_header_size, header.end(), payload.begin());
      Bytes data = random_bytes(rng, 64);
      payload.insert(payload.end(), data.begin(), data.end());
      payload = mutate(std::move(payload), rng);
      INFO("OFFSET_DATA payload: ", hex(payload));
      auto d = decode_offset_data(payload);
      const bool ok = payload.size() >= 9 && fits_below_2_64(load_be(payload, 0, 8), payload.size() - 8);
      REQUIRE(d.has_value() == ok);
      if (accepted_else_explained(d)) {
        CHECK(d->offset == load_be(payload, 0, 8));
        CHECK(d->data.data() == payload.data() + 8);
        CHECK(d->data.size() == payload.size() - 8);
        ++accepted;
      }
    }
    // OFFSET_DATA, prefix first: the length comes from a header that may lie.
    {
      Bytes prefix = random_bytes(rng, 10);
      if (one_in(rng, 2)) prefix.resize(8, random_byte(rng));
      const std::uint32_t chunk_length = edgy_u32(rng);
      INFO("OFFSET_DATA prefix: ", hex(prefix), " chunk length ", chunk_length);
      auto range = decode_offset_data_prefix(prefix, chunk_length);
      const bool ok = prefix.size() == 8 && chunk_length >= 9 && fits_below_2_64(load_be(prefix, 0, 8), chunk_length - 8u);
      REQUIRE(range.has_value() == ok);
      if (range) {
        CHECK(range->offset == load_be(prefix, 0, 8));
        CHECK(range->length == chunk_length - 8u);
        CHECK(range->end() >= range->offset);
      }
    }
    // OFFSET_HOLE.
    {
      const auto chunk = encode_offset_hole(0, 0, edgy_u64(rng), edgy_u32(rng));
      const Bytes payload = mutate(tail(to_vector(chunk), chunk_header_size), rng);
      INFO("OFFSET_HOLE payload: ", hex(payload));
      auto hole = decode_offset_hole(payload);
      const bool ok = payload.size() == 12 && load_be(payload, 8, 4) != 0 &&
                      fits_below_2_64(load_be(payload, 0, 8), load_be(payload, 8, 4));
      REQUIRE(hole.has_value() == ok);
      if (accepted_else_explained(hole)) {
        CHECK(hole->offset == load_be(payload, 0, 8));
        CHECK(hole->length == load_be(payload, 8, 4));
        ++accepted;
      }
    }
    // BLOCK_STATUS: accepted descriptors re-encode to the very payload.
    {
      std::vector<BlockStatusDescriptor> descriptors(pick<std::size_t>(rng, 1, 6));
      for (auto& d : descriptors) d = {one_in(rng, 8) ? 1u : edgy_u32(rng) | 1u, static_cast<std::uint32_t>(rng() & 3)};
      auto encoded = encode_block_status(0, 0, static_cast<std::uint32_t>(rng()), descriptors);
      REQUIRE(encoded);
      const Bytes payload = mutate(tail(*encoded, chunk_header_size), rng);
      INFO("BLOCK_STATUS payload: ", hex(payload));
      auto status = decode_block_status(payload);
      bool ok = payload.size() >= 12 && (payload.size() - 4) % 8 == 0;
      for (std::size_t at = 4; ok && at + 8 <= payload.size(); at += 8) ok = load_be(payload, at, 4) != 0;
      REQUIRE(status.has_value() == ok);
      if (accepted_else_explained(status)) {
        CHECK(status->descriptors.size() == (payload.size() - 4) / 8);
        auto again = encode_block_status(0, 0, status->context_id, status->descriptors);
        REQUIRE(again);
        CHECK(hex(tail(*again, chunk_header_size)) == hex(payload));
        ++accepted;
      }
    }
    // Error chunks, of the two known types, an unknown error type, and a non-error type.
    {
      const std::uint16_t types[] = {0x8001, 0x8002, static_cast<std::uint16_t>(0x8000u | (rng() & 0x7fff)),
                                     static_cast<std::uint16_t>(rng() & 0x7fff)};
      const auto type = static_cast<ReplyType>(types[pick<std::size_t>(rng, 0, 3)]);
      const std::optional<std::uint64_t> offset =
          one_in(rng, 2) ? std::optional<std::uint64_t>(edgy_u64(rng)) : std::nullopt;
      const std::string message = as_text(random_bytes(rng, 40));
      const Bytes chunk = encode_error_chunk(0, 0, static_cast<Errno>(pick(rng, 0, 200)), message, offset);
      const Bytes payload = mutate(tail(chunk, chunk_header_size), rng);
      CAPTURE(static_cast<unsigned>(type));
      INFO("error payload: ", hex(payload));
      auto e = decode_error_chunk(type, payload);
      const bool error_type = (static_cast<unsigned>(type) & 0x8000u) != 0;
      const std::size_t fixed = type == ReplyType::error_offset ? 14 : 6;
      bool ok = error_type && payload.size() >= fixed && load_be(payload, 0, 4) != 0 &&
                load_be(payload, 4, 2) <= payload.size() - fixed;
      if (ok && type == ReplyType::error_offset) ok = payload.size() == 14 + load_be(payload, 4, 2);
      REQUIRE(e.has_value() == ok);
      if (!accepted_else_explained(e)) continue;
      ++accepted;
      CHECK(static_cast<std::uint32_t>(e->error) == load_be(payload, 0, 4));
      CHECK(e->message.size() == load_be(payload, 4, 2));
      CHECK(e->offset.has_value() == (type == ReplyType::error_offset));
      // An ERROR_OFFSET is exactly its fields; an ERROR may carry trailing bytes, which
      // are ignored, so only its re-encoding is a prefix of what was received.
      const Bytes again = tail(encode_error_chunk(0, 0, e->error, e->message, e->offset), chunk_header_size);
      if (type == ReplyType::error_offset)
        CHECK(hex(again) == hex(payload));
      else
        CHECK(is_prefix_of(again, payload));
    }
  }
  CHECK(accepted > 3000);
}

namespace {

bool is_power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

TransmissionTerms random_terms(std::mt19937& rng) {
  TransmissionTerms terms;
  terms.size = one_in(rng, 4) ? edgy_u64(rng) : pick<std::uint64_t>(rng, 0, 1u << 24) * 512;
  terms.flags = static_cast<std::uint16_t>(rng() | transmission_flag::has_flags);
  terms.block_sizes.minimum = 1u << pick(rng, 0, 16);
  terms.block_sizes.preferred = std::max(terms.block_sizes.minimum, 512u) << pick(rng, 0, 4);
  terms.block_sizes.maximum =
      one_in(rng, 4) ? 0xffffffffu : terms.block_sizes.preferred * pick<std::uint32_t>(rng, 1, 64);
  terms.structured_replies = one_in(rng, 2);
  terms.allocation_context = terms.structured_replies && one_in(rng, 2);
  return terms;
}

// Requests that come close to passing: aligned, inside the export, permitted flags.
RequestHeader plausible_request(std::mt19937& rng, const TransmissionTerms& terms) {
  RequestHeader r = random_request(rng);
  const std::uint64_t minimum = terms.block_sizes.minimum;
  if (one_in(rng, 2)) {
    r.command = static_cast<Command>(pick<std::uint16_t>(rng, 0, 7));
    r.flags = static_cast<std::uint16_t>(rng() & 0x1f & (one_in(rng, 2) ? 0 : 0x1f));
    const std::uint64_t blocks = terms.size / minimum;
    const std::uint64_t first = blocks == 0 ? 0 : pick<std::uint64_t>(rng, 0, blocks - 1);
    const std::uint64_t count = std::min<std::uint64_t>(pick<std::uint64_t>(rng, 0, 64), blocks - first);
    r.offset = first * minimum;
    r.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(count * minimum, 0xffffffffu / minimum * minimum));
    if (r.command == Command::flush || r.command == Command::disc) r.offset = r.length = 0;
  }
  return r;
}

// check_request's documented rule (request_checks.hpp, block_size_rules.hpp), restated.
bool servable(const RequestHeader& r, const TransmissionTerms& t) {
  using namespace command_flag;
  const auto command = static_cast<std::uint16_t>(r.command);
  if (command > 7) return false;
  if (r.flags & ~(fua | no_hole | df | req_one | fast_zero)) return false;
  const bool is_read = r.command == Command::read;
  const bool is_write = r.command == Command::write;
  const bool zeroes = r.command == Command::write_zeroes;
  const bool status = r.command == Command::block_status;
  if ((r.flags & fua) && !(t.flags & transmission_flag::send_fua)) return false;
  if ((r.flags & no_hole) && !zeroes) return false;
  if ((r.flags & fast_zero) && !(zeroes && (t.flags & transmission_flag::send_fast_zero))) return false;
  if ((r.flags & df) && !(is_read && (t.flags & transmission_flag::send_df))) return false;
  if ((r.flags & req_one) && !status) return false;
  if ((is_write || zeroes || r.command == Command::trim) && (t.flags & transmission_flag::read_only)) return false;
  if (r.command == Command::trim && !(t.flags & transmission_flag::send_trim)) return false;
  if (zeroes && !(t.flags & transmission_flag::send_write_zeroes)) return false;
  if (status && !(t.structured_replies && t.allocation_context)) return false;
  if (r.command == Command::flush || r.command == Command::disc) return r.offset == 0 && r.length == 0;
  if (r.offset % t.block_sizes.minimum != 0 || r.length % t.block_sizes.minimum != 0) return false;
  if ((is_read || is_write || r.command == Command::cache) && r.length > t.block_sizes.maximum) return false;
  if (status && r.length == 0) return false;
  return r.offset <= t.size && r.length <= t.size - r.offset;
}

}  // namespace

TEST_CASE("NBD transmission fuzz: requests decoded from mutated bytes are served only when the rules allow") {
  const std::uint32_t seed = 0xc7ec;
  int served = 0;
  int refused = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const TransmissionTerms terms = random_terms(rng);
    REQUIRE(is_power_of_two(terms.block_sizes.minimum));
    CAPTURE(terms.size);
    CAPTURE(terms.flags);
    CAPTURE(terms.block_sizes.minimum);
    CAPTURE(terms.block_sizes.maximum);
    Bytes wire = to_vector(encode_request_header(plausible_request(rng, terms)));
    if (one_in(rng, 3)) wire = mutate(std::move(wire), rng);
    INFO("request: ", hex(wire));
    auto request = decode_request_header(wire);
    if (!request) continue;
    auto refusal = check_request(*request, terms);
    REQUIRE(refusal.has_value() != servable(*request, terms));
    if (!refusal) {
      ++served;
      continue;
    }
    ++refused;
    CHECK_FALSE(refusal->message.empty());
    const bool writes = request->command == Command::write || request->command == Command::write_zeroes ||
                        request->command == Command::trim;
    if (refusal->error == Errno::eperm) {
      CHECK(writes);
      CHECK((terms.flags & transmission_flag::read_only) != 0);
    } else if (refusal->error == Errno::enospc) {
      CHECK((request->command == Command::write || request->command == Command::write_zeroes));
    } else {
      CHECK(refusal->error == Errno::einval);
    }
  }
  CHECK(served > 300);
  CHECK(refused > 300);
}
