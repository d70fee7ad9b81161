// Malformed-input tests for the structured reply to a READ: random chunk sequences
// against a byte-map model of the rules in reply_assembler.hpp, and whole mutated reply
// streams parsed the way a client parses them. Whatever a server sends, the read ends
// in an error or with every requested byte covered exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <span>
#include <string>
#include <vector>

#include "protocols/nbd/reply_assembler.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using namespace sluice::test;

namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// The request's bytes, one flag each: small requests keep the model obviously right.
struct Model {
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  bool dont_fragment = false;
  std::vector<bool> covered;
  std::uint64_t covered_count = 0;  // kept, not counted: counting bits each step is slow under ASan
  int content_chunks = 0;
  bool finished = false;
  // The error that wins: the lowest offset, the first among equals.
  std::optional<std::uint64_t> error_at;
  Errno error = Errno::none;
  std::string error_text;

  bool inside(std::uint64_t at) const { return at >= offset && at - offset < length; }

  bool add_content(const ContentRange& r) {
    if (finished || r.length == 0 || !inside(r.offset) || r.length > length - (r.offset - offset)) return false;
    if (dont_fragment && content_chunks > 0) return false;
    const std::size_t first = static_cast<std::size_t>(r.offset - offset);
    for (std::size_t i = first; i < first + r.length; ++i)
      if (covered[i]) return false;
    for (std::size_t i = first; i < first + r.length; ++i) covered[i] = true;
    covered_count += r.length;
    ++content_chunks;
    return true;
  }

  bool add_error(const ErrorChunk& e) {
    if (finished || (e.offset && !inside(*e.offset))) return false;
    const std::uint64_t at = e.offset.value_or(offset);
    if (!error_at || at < *error_at) {
      error_at = at;
      error = e.error;
      error_text = e.message;
    }
    return true;
  }

  // The first uncovered range, as finish() must name it.
  std::pair<std::uint64_t, std::uint64_t> first_gap() const {
    auto begin = std::find(covered.begin(), covered.end(), false);
    auto end = std::find(begin, covered.end(), true);
    return {offset + static_cast<std::uint64_t>(begin - covered.begin()),
            offset + static_cast<std::uint64_t>(end - covered.begin())};
  }
};

ContentRange random_range(std::mt19937& rng, const Model& m) {
  switch (pick(rng, 0, 9)) {
    case 0: return {random_u64(rng), static_cast<std::uint64_t>(rng())};  // anywhere, even past 2^64
    case 1: return {u64_max - pick<std::uint64_t>(rng, 0, 8192), pick<std::uint64_t>(rng, 0, 8192)};
    case 2: return {m.offset + pick<std::uint64_t>(rng, 0, m.length), 0};
    case 3: {  // straddling either end of the request
      const std::uint64_t start = m.offset >= 16 ? m.offset - pick<std::uint64_t>(rng, 0, 16) : m.offset;
      return {start, pick<std::uint64_t>(rng, 1, m.length + 32ull)};
    }
    case 4:
    case 5: {  // what a well-behaved server sends next: part of the first gap
      const auto [begin, end] = m.first_gap();
      if (begin == end) return {begin, 1};
      return {begin, one_in(rng, 2) ? end - begin : pick<std::uint64_t>(rng, 1, end - begin)};
    }
    default: {  // inside, and so often overlapping earlier chunks
      if (m.length == 0) return {m.offset, 1};
      const std::uint64_t begin = pick<std::uint64_t>(rng, 0, m.length - 1);
      const std::uint64_t size = pick<std::uint64_t>(rng, 1, std::min<std::uint64_t>(m.length - begin, 1024));
      return {m.offset + begin, size};
    }
  }
}

std::uint16_t random_chunk_type(std::mt19937& rng) {
  static constexpr std::uint16_t types[] = {0, 1, 2, 3, 4, 5, 6, 0x8001, 0x8002, 0x8003, 0x7fff, 0xffff};
  if (one_in(rng, 6)) return static_cast<std::uint16_t>(rng());
  return types[pick<std::size_t>(rng, 0, std::size(types) - 1)];
}

}  // namespace

TEST_CASE("NBD reply assembler fuzz: random chunk sequences follow the rules, and DONE gives a verdict") {
  const std::uint32_t seed = 0xa55e;
  int succeeded = 0;
  int server_errors = 0;
  int gaps = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    Model m;
    m.length = one_in(rng, 50) ? 0 : pick<std::uint32_t>(rng, 1, 2048);
    // Requests at the very top of the offset space still end at or below 2^64 - 1.
    m.offset = one_in(rng, 4) ? u64_max - m.length - pick<std::uint64_t>(rng, 0, 3)
                              : pick<std::uint64_t>(rng, 0, 1u << 20);
    m.dont_fragment = one_in(rng, 5);
    m.covered.assign(m.length, false);
    CAPTURE(m.offset);
    CAPTURE(m.length);
    CAPTURE(m.dont_fragment);
    ReadReplyAssembler assembler(m.offset, m.length, m.dont_fragment);

    // Mostly content, so that requests do get covered; sometimes DONE twice.
    const int steps = pick(rng, 1, 40);
    for (int step = 0; step < steps; ++step) {
      CAPTURE(step);
      const int what = pick(rng, 0, 19);
      if (what < 2) {
        ChunkHeader header{static_cast<std::uint16_t>(rng()), static_cast<ReplyType>(random_chunk_type(rng)), 1, 0};
        const auto type = static_cast<std::uint16_t>(header.type);
        CAPTURE(type);
        const bool ok = !m.finished && (type <= 2 || (type & 0x8000) != 0);
        auto status = assembler.check_chunk(header);
        REQUIRE(status.has_value() == ok);
        accepted_else_explained(status);
      } else if (what < 15) {
        const ContentRange range = random_range(rng, m);
        CAPTURE(range.offset);
        CAPTURE(range.length);
        const bool ok = m.add_content(range);
        auto status = one_in(rng, 2) ? assembler.add_data(range) : assembler.add_hole(range);
        REQUIRE(status.has_value() == ok);
        accepted_else_explained(status, std::errc::protocol_error);
      } else if (what < 18) {
        ErrorChunk chunk;
        chunk.error = static_cast<Errno>(pick(rng, 1, 120));
        chunk.message = "error chunk " + std::to_string(step);
        if (one_in(rng, 2)) {
          const ContentRange near = random_range(rng, m);
          chunk.offset = near.offset;
        }
        CAPTURE(chunk.offset.value_or(0));
        const bool ok = m.add_error(chunk);
        auto status = assembler.add_error(chunk);
        REQUIRE(status.has_value() == ok);
      } else {
        // DONE: the verdict, or the complaint that it came twice.
        const bool again = m.finished;
        m.finished = true;
        auto verdict = assembler.finish();
        CHECK(assembler.finished());
        if (again) {
          REQUIRE_FALSE(verdict);
          CHECK(contains(verdict.error().message, "DONE twice"));
        } else if (m.error_at) {
          REQUIRE_FALSE(verdict);
          CHECK(verdict.error().code == to_error_code(m.error));
          CHECK(contains(verdict.error().message, ": " + m.error_text));
          ++server_errors;
        } else if (m.covered_count == m.length) {
          REQUIRE(verdict);
          ++succeeded;
        } else {
          REQUIRE_FALSE(verdict);
          CHECK((verdict.error().code == std::errc::protocol_error));
          const auto [begin, end] = m.first_gap();
          CHECK(contains(verdict.error().message,
                         "leaving bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ") uncovered"));
          ++gaps;
        }
      }
      REQUIRE(assembler.covered_bytes() == m.covered_count);
    }
    if (!m.finished) {
      auto verdict = assembler.finish();
      CHECK(verdict.has_value() == (!m.error_at && m.covered_count == m.length));
    }
  }
  CHECK(succeeded > 25);
  CHECK(server_errors > 25);
  CHECK(gaps > 25);
}

namespace {

// A well-formed reply to a READ of `length` bytes at `offset`: the range cut into
// OFFSET_DATA and OFFSET_HOLE chunks in random order, perhaps an error chunk, then DONE
// on the last chunk or on a NONE chunk of its own.
Bytes random_reply(std::mt19937& rng, std::uint64_t offset, std::uint32_t length, bool& has_error) {
  std::vector<std::uint32_t> cuts{0, length};
  for (int i = pick(rng, 0, 6); i > 0; --i) cuts.push_back(pick<std::uint32_t>(rng, 0, length));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Bytes> chunks;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::uint64_t at = offset + cuts[i];
    const std::uint32_t size = cuts[i + 1] - cuts[i];
    if (one_in(rng, 3)) {
      auto hole = encode_offset_hole(7, 0, at, size);
      chunks.emplace_back(hole.begin(), hole.end());
    } else {
      Bytes chunk(offset_data_header_size);
      encode_offset_data_header(7, 0, at, size, std::span<std::byte, offset_data_header_size>(chunk));
      for (std::uint32_t b = 0; b < size; ++b) chunk.push_back(static_cast<std::byte>(rng()));
      chunks.push_back(std::move(chunk));
    }
  }
  has_error = one_in(rng, 5);
  if (has_error) {
    const std::optional<std::uint64_t> at =
        one_in(rng, 2) ? std::optional<std::uint64_t>(offset + pick<std::uint32_t>(rng, 0, length - 1)) : std::nullopt;
    chunks.push_back(encode_error_chunk(7, 0, Errno::eio, "disk on fire", at));
  }
  std::shuffle(chunks.begin(), chunks.end(), rng);
  if (one_in(rng, 2)) {
    auto none = encode_none_chunk(7);
    chunks.emplace_back(none.begin(), none.end());
  } else {
    chunks.back()[5] |= std::byte{reply_flag::done};  // the low byte of the flags
  }
  Bytes out;
  for (const Bytes& chunk : chunks) out.insert(out.end(), chunk.begin(), chunk.end());
  return out;
}

struct ClientOutcome {
  Status status;
  bool reached_done = false;
  std::vector<bool> written;  // bytes of the request the client was allowed to fill
};

// What a client does with the reply: header, check, payload, decode, assemble, until
// DONE. Running out of bytes is a truncated reply.
ClientOutcome read_reply(std::span<const std::byte> wire, std::uint64_t offset, std::uint32_t length) {
  ClientOutcome out{Status{}, false, std::vector<bool>(length, false)};
  ReadReplyAssembler assembler(offset, length);
  auto fail_with = [&](Error e) {
    out.status = tl::unexpected(std::move(e));
    return out;
  };
  auto accept = [&](const ContentRange& r) -> Status {
    for (std::uint64_t i = r.offset - offset; i < r.offset - offset + r.length; ++i) {
      if (out.written[i]) return fail(std::errc::protocol_error, "test: byte written twice");
      out.written[i] = true;
    }
    return {};
  };
  for (;;) {
    if (wire.size() < chunk_header_size) return fail_with(Error{std::make_error_code(std::errc::connection_reset), "truncated reply"});
    auto header = decode_chunk_header(wire.first(chunk_header_size));
    wire = wire.subspan(chunk_header_size);
    if (!header) return fail_with(header.error());
    if (Status ok = assembler.check_chunk(*header); !ok) return fail_with(ok.error());
    if (wire.size() < header->length) return fail_with(Error{std::make_error_code(std::errc::connection_reset), "truncated payload"});
    auto payload = wire.first(header->length);
    wire = wire.subspan(header->length);
    Status added;
    if (header->type == ReplyType::offset_data) {
      auto data = decode_offset_data(payload);
      if (!data) return fail_with(data.error());
      const ContentRange range{data->offset, data->data.size()};
      added = assembler.add_data(range);
      if (added) added = accept(range);
    } else if (header->type == ReplyType::offset_hole) {
      auto hole = decode_offset_hole(payload);
      if (!hole) return fail_with(hole.error());
      added = assembler.add_hole(*hole);
      if (added) added = accept(*hole);
    } else if (is_error(header->type)) {
      auto error = decode_error_chunk(header->type, payload);
      if (!error) return fail_with(error.error());
      added = assembler.add_error(*error);
    }
    if (!added) return fail_with(added.error());
    if (header->done()) {
      out.reached_done = true;
      out.status = assembler.finish();
      return out;
    }
  }
}

}  // namespace

TEST_CASE("NBD reply assembler fuzz: mutated reply streams end in an error or in exact coverage") {
  const std::uint32_t seed = 0x5eed5;
  int intact_ok = 0;
  int mutated_ok = 0;
  int mutated_failed = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const std::uint32_t length = pick<std::uint32_t>(rng, 1, 2048);
    const std::uint64_t offset = one_in(rng, 4) ? u64_max - length : pick<std::uint64_t>(rng, 0, 1u << 30);
    CAPTURE(offset);
    CAPTURE(length);
    bool has_error = false;
    Bytes wire = random_reply(rng, offset, length, has_error);
    const bool intact = one_in(rng, 5);
    if (!intact) wire = mutate(std::move(wire), rng);
    INFO("reply: ", hex(wire));

    ClientOutcome outcome = read_reply(wire, offset, length);
    if (intact) {
      // Guards the harness: an untouched reply must give exactly the server's verdict.
      CHECK(outcome.reached_done);
      CHECK(outcome.status.has_value() == !has_error);
      if (outcome.status) ++intact_ok;
      continue;
    }
    if (outcome.status) {
      ++mutated_ok;
      CHECK(outcome.reached_done);
      CHECK(std::count(outcome.written.begin(), outcome.written.end(), false) == 0);
    } else {
      ++mutated_failed;
      CHECK_FALSE(outcome.status.error().message.empty());
    }
  }
  CHECK(intact_ok > 100);
  CHECK(mutated_ok > 50);  // payload bytes changed: still a complete, consistent read
  CHECK(mutated_failed > 500);
}
