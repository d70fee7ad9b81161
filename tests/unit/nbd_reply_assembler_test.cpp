#include <doctest/doctest.h>

#include <algorithm>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <string>
#include <vector>

#include "protocols/nbd/reply_assembler.hpp"

using namespace sluice;
using namespace sluice::nbd;

namespace {

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

ChunkHeader chunk(ReplyType type, bool done = false) {
  return ChunkHeader{static_cast<std::uint16_t>(done ? reply_flag::done : 0), type, 1, 0};
}

}  // namespace

TEST_CASE("one data chunk covering the request succeeds") {
  ReadReplyAssembler r(1 << 20, 65536);
  CHECK(r.check_chunk(chunk(ReplyType::offset_data, true)));
  CHECK(r.add_data({1 << 20, 65536}));
  CHECK(r.covered_bytes() == 65536);
  CHECK(r.finish());
  CHECK(r.finished());
}

TEST_CASE("a request ending exactly at 2^64 still sees overlaps and gaps") {
  // Its end does not fit in 64 bits; ranges kept as absolute offsets once wrapped to 0
  // there, so an overlap passed and a gap went unnoticed.
  const std::uint64_t top = ~std::uint64_t{0} - 4095;  // 2^64 - 4096
  ReadReplyAssembler r(top, 4096);
  CHECK(r.add_data({top + 2048, 2048}));
  auto overlap = r.add_data({top + 3072, 1024});
  REQUIRE_FALSE(overlap);
  CHECK(contains(overlap.error().message, "overlaps"));
  CHECK(r.add_hole({top, 1024}));
  auto gap = r.finish();
  REQUIRE_FALSE(gap);
  CHECK(contains(gap.error().message, "leaving bytes [" + std::to_string(top + 1024) + ", " +
                                          std::to_string(top + 2048) + ") uncovered"));

  ReadReplyAssembler whole(top, 4096);
  CHECK(whole.add_hole({top, 2048}));
  CHECK(whole.add_data({top + 2048, 2048}));
  CHECK(whole.finish());
}

TEST_CASE("data and holes in any order cover the request") {
  const std::uint64_t base = 4096;
  const std::uint32_t length = 64 * 1024;
  std::vector<ContentRange> pieces;
  for (std::uint64_t off = 0; off < length; off += 4096) pieces.push_back({base + off, 4096});
  std::mt19937 rng(42);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(pieces.begin(), pieces.end(), rng);
    ReadReplyAssembler r(base, length);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      CHECK(r.check_chunk(chunk(i % 3 ? ReplyType::offset_data : ReplyType::offset_hole)));
      CHECK((i % 3 ? r.add_data(pieces[i]) : r.add_hole(pieces[i])));
    }
    CHECK(r.check_chunk(chunk(ReplyType::none, true)));
    CHECK(r.finish());
  }
}

TEST_CASE("DONE with bytes missing is a protocol error naming the gap") {
  ReadReplyAssembler r(0, 12288);
  CHECK(r.add_data({0, 4096}));
  CHECK(r.add_hole({8192, 4096}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == std::errc::protocol_error);
  CHECK(s.error().message ==
        "NBD server finished the READ of 12288 bytes at offset 0 leaving bytes [4096, 8192) "
        "uncovered (4096 bytes missing)");
}

TEST_CASE("DONE with nothing received names the whole request") {
  ReadReplyAssembler r(512, 512);
  CHECK(r.check_chunk(chunk(ReplyType::none, true)));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(contains(s.error().message, "bytes [512, 1024) uncovered"));
}

TEST_CASE("a missing tail is found too") {
  ReadReplyAssembler r(0, 8192);
  CHECK(r.add_data({0, 4096}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(contains(s.error().message, "bytes [4096, 8192) uncovered"));
}

TEST_CASE("content outside the request is refused") {
  ReadReplyAssembler r(4096, 4096);
  auto before = r.add_data({0, 4096});
  REQUIRE_FALSE(before);
  CHECK(before.error().message ==
        "NBD OFFSET_DATA chunk for 4096 bytes at offset 0 lies outside the READ of 4096 bytes "
        "at offset 4096");
  CHECK_FALSE(r.add_data({4096, 4097}));       // runs past the end
  CHECK_FALSE(r.add_hole({8192, 1}));          // starts at the end
  CHECK_FALSE(r.add_data({4095, 2}));          // straddles the start
  CHECK_FALSE(r.add_data({~0ull - 10, 100}));  // far away, no overflow trick
  CHECK(r.covered_bytes() == 0);
  CHECK(r.add_data({4096, 4096}));
  CHECK(r.finish());
}

TEST_CASE("empty content chunks are refused") {
  ReadReplyAssembler r(0, 4096);
  auto empty = r.add_hole({100, 0});
  REQUIRE_FALSE(empty);
  CHECK(contains(empty.error().message, "is empty"));
}

TEST_CASE("overlapping content is refused, in either order") {
  ReadReplyAssembler r(0, 16384);
  CHECK(r.add_data({4096, 4096}));
  auto same = r.add_data({4096, 4096});
  REQUIRE_FALSE(same);
  CHECK(contains(same.error().message, "overlaps bytes [4096, 8192) already received"));
  CHECK_FALSE(r.add_hole({0, 4097}));     // into the next one
  CHECK_FALSE(r.add_hole({8191, 100}));   // into the previous one
  CHECK_FALSE(r.add_data({5000, 10}));    // inside
  CHECK_FALSE(r.add_data({0, 16384}));    // around
  CHECK(r.add_hole({0, 4096}));           // touching is fine
  CHECK(r.add_data({8192, 8192}));
  CHECK(r.finish());
}

TEST_CASE("merged ranges still catch overlaps") {
  ReadReplyAssembler r(0, 3 * 4096);
  CHECK(r.add_data({0, 4096}));
  CHECK(r.add_data({8192, 4096}));
  CHECK(r.add_data({4096, 4096}));  // joins both neighbours into one range
  CHECK_FALSE(r.add_data({6000, 1}));
  CHECK_FALSE(r.add_data({0, 1}));
  CHECK_FALSE(r.add_data({12287, 1}));
  CHECK(r.finish());
}

TEST_CASE("DF allows one content chunk only") {
  ReadReplyAssembler r(0, 8192, true);
  CHECK(r.add_data({0, 4096}));
  auto second = r.add_data({4096, 4096});
  REQUIRE_FALSE(second);
  CHECK(contains(second.error().message, "sent with DF"));
}

TEST_CASE("an ERROR chunk fails the read with the server's errno and message") {
  ReadReplyAssembler r(1 << 20, 65536);
  CHECK(r.add_data({1 << 20, 4096}));
  CHECK(r.check_chunk(chunk(ReplyType::error, true)));
  CHECK(r.add_error({Errno::eio, "disk on fire", std::nullopt}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == std::errc::io_error);
  CHECK(s.error().message ==
        "NBD server: READ of 65536 bytes at offset 1048576 failed with EIO "
        "(Input/output error): disk on fire");
}

TEST_CASE("ERROR_OFFSET names the offset; the lowest one wins whatever the order") {
  ReadReplyAssembler r(0, 65536);
  CHECK(r.add_error({Errno::enospc, "", 40960}));
  CHECK(r.add_data({0, 8192}));
  CHECK(r.add_error({Errno::eio, "bad sector", 8192}));
  CHECK(r.add_error({Errno::eperm, "", 16384}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == std::errc::io_error);
  CHECK(s.error().message ==
        "NBD server: READ at offset 8192 (of 65536 bytes at offset 0) failed with EIO "
        "(Input/output error): bad sector");
}

TEST_CASE("an error chunk wins even if content covered everything") {
  ReadReplyAssembler r(0, 4096);
  CHECK(r.add_data({0, 4096}));
  CHECK(r.add_error({Errno::eshutdown, "", std::nullopt}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(contains(s.error().message, "ESHUTDOWN"));
}

TEST_CASE("an ERROR_OFFSET outside the request is a protocol error") {
  ReadReplyAssembler r(4096, 4096);
  auto outside = r.add_error({Errno::eio, "", 8192});
  REQUIRE_FALSE(outside);
  CHECK(outside.error().code == std::errc::protocol_error);
  CHECK_FALSE(r.add_error({Errno::eio, "", 0}));
}

TEST_CASE("the server's message is made printable") {
  ReadReplyAssembler r(0, 512);
  CHECK(r.add_error({Errno::eio, "a\x1b[31mb", std::nullopt}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(contains(s.error().message, ": a?[31mb"));
}

TEST_CASE("unknown NBD errors read as EINVAL") {
  ReadReplyAssembler r(0, 512);
  CHECK(r.add_error({static_cast<Errno>(0x7f), "", std::nullopt}));
  auto s = r.finish();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == std::errc::invalid_argument);
  CHECK(contains(s.error().message, "error 127"));
}

TEST_CASE("chunk types that do not belong to a READ are refused") {
  ReadReplyAssembler r(0, 512);
  CHECK(r.check_chunk(chunk(ReplyType::offset_data)));
  CHECK(r.check_chunk(chunk(ReplyType::offset_hole)));
  CHECK(r.check_chunk(chunk(ReplyType::error_offset)));
  CHECK(r.check_chunk(chunk(static_cast<ReplyType>(0x8009))));
  auto status = r.check_chunk(chunk(ReplyType::block_status, true));
  REQUIRE_FALSE(status);
  CHECK(status.error().message ==
        "NBD server answered the READ of 512 bytes at offset 0 with a BLOCK_STATUS chunk");
}

TEST_CASE("nothing is accepted after DONE") {
  ReadReplyAssembler r(0, 512);
  CHECK(r.add_data({0, 512}));
  CHECK(r.finish());
  CHECK_FALSE(r.check_chunk(chunk(ReplyType::none, true)));
  CHECK_FALSE(r.add_data({0, 1}));
  CHECK_FALSE(r.add_error({Errno::eio, "", std::nullopt}));
  auto twice = r.finish();
  REQUIRE_FALSE(twice);
  CHECK(contains(twice.error().message, "DONE twice"));
}

TEST_CASE("a simple reply carrying READ data is refused once structured replies were negotiated") {
  // The assembler exists only for a READ sent with structured replies on; the spec then
  // demands a structured reply, and data behind a simple header cannot be checked.
  ReadReplyAssembler r(4096, 512);
  Status data = r.check_simple_reply(false);
  REQUIRE_FALSE(data);
  CHECK(data.error().code == std::errc::protocol_error);
  CHECK(data.error().message ==
        "NBD server answered the READ of 512 bytes at offset 4096 with a simple reply carrying data, but "
        "structured replies were negotiated");
  // An error carries no data: the stream stays in step, and the read fails with it.
  CHECK(r.check_simple_reply(true));
}
