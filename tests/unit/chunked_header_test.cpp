#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "protocols/chunked/chunk_header.hpp"

using namespace sluice;

namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::vector<std::byte> encoded(const ChunkHeader& header) {
  auto array = encode_chunk_header(header);
  REQUIRE(array);
  return {array->begin(), array->end()};
}

std::string decode_error(const ChunkHeader& header, const ChunkLimits& limits) {
  auto array = encode_chunk_header(header);
  REQUIRE(array);
  auto decoded = decode_chunk_header(*array, limits);
  REQUIRE_FALSE(decoded);
  CHECK((decoded.error().code == std::errc::protocol_error));
  return decoded.error().message;
}

constexpr std::uint64_t MiB = 1 << 20;
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

}  // namespace

TEST_CASE("chunk header golden bytes: little-endian u64 offset then u32 length") {
  CHECK(chunk_header_size == 12);
  CHECK(encoded({0x1122334455667788, 0x00200000}) ==
        bytes({0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x00, 0x20, 0x00}));
  // 1 MiB offset, one 4 KiB payload.
  CHECK(encoded({0x100000, 0x1000}) ==
        bytes({0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00}));
  // The top byte of each field lands last.
  CHECK(encoded({0xff00000000000000, 0x12000200}) ==
        bytes({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x00, 0x02, 0x00, 0x12}));
}

TEST_CASE("lengths of 2^31 or more are refused: vhd-tool reads a signed int32") {
  auto largest = encode_chunk_header({512, 0x7fffffff});
  REQUIRE(largest);
  CHECK(std::vector<std::byte>(largest->begin() + 8, largest->end()) == bytes({0xff, 0xff, 0xff, 0x7f}));
  auto too_long = encode_chunk_header({512, 0x80000000});
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().message == "chunk at offset 512: length 2147483648 does not fit vhd-tool's signed "
                                    "32-bit length field");
}

TEST_CASE("the terminator is 12 zero bytes") {
  CHECK(chunk_terminator.is_terminator());
  CHECK(encoded(chunk_terminator) == std::vector<std::byte>(12, std::byte{0}));
  CHECK(std::vector<std::byte>(chunk_terminator_bytes.begin(), chunk_terminator_bytes.end()) ==
        std::vector<std::byte>(12, std::byte{0}));
  auto decoded = decode_chunk_header(chunk_terminator_bytes, ChunkLimits{MiB});
  REQUIRE(decoded);
  CHECK(decoded->is_terminator());
  // vhd-tool's receiver stops only when both fields are zero.
  CHECK_FALSE((ChunkHeader{512, 0}.is_terminator()));
  CHECK_FALSE((ChunkHeader{0, 512}.is_terminator()));
}

TEST_CASE("encoding into the headroom in front of a payload touches exactly 12 bytes") {
  std::array<std::byte, 20> memory;
  memory.fill(std::byte{0xee});
  std::span<std::byte> headroom(memory.data() + 2, 12);
  REQUIRE(encode_chunk_header({0x200, 0x400}, headroom));
  CHECK(std::vector<std::byte>(memory.begin(), memory.end()) ==
        bytes({0xee, 0xee, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0x00, 0x04, 0, 0, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee}));

  // A larger span: only its first 12 bytes are written.
  memory.fill(std::byte{0xee});
  REQUIRE(encode_chunk_header({0, 512}, std::span<std::byte>(memory)));
  CHECK(memory[11] == std::byte{0});
  CHECK(memory[12] == std::byte{0xee});

  auto short_span = encode_chunk_header({4096, 512}, std::span<std::byte>(memory.data(), 11));
  REQUIRE_FALSE(short_span);
  CHECK(short_span.error().message ==
        "chunk at offset 4096: header needs 12 bytes, the space before the payload has 11");
  CHECK(memory[0] == std::byte{0});  // untouched by the failed call (still the previous header)
}

TEST_CASE("encode and decode round trip") {
  const ChunkLimits limits{u64_max, max_chunk_length_ceiling};
  for (ChunkHeader header : {ChunkHeader{0, 512}, ChunkHeader{512, 2 * MiB}, ChunkHeader{0x1122334455667600, 4096},
                             ChunkHeader{u64_max - 511 - 32 * MiB, 32 * MiB}, ChunkHeader{u64_max - 1023, 512}}) {
    CAPTURE(header.offset);
    auto array = encode_chunk_header(header);
    REQUIRE(array);
    auto decoded = decode_chunk_header(*array, limits);
    REQUIRE(decoded);
    CHECK(*decoded == header);
  }
}

TEST_CASE("read_chunk_header reads the first 12 bytes and refuses fewer") {
  auto input = bytes({0x00, 0x02, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0, 0, 0x99, 0x99});
  auto header = read_chunk_header(input);
  REQUIRE(header);
  CHECK(*header == ChunkHeader{512, 512});

  for (std::size_t n : {0, 1, 8, 11}) {
    CAPTURE(n);
    auto partial = decode_chunk_header(std::span(input).first(n), ChunkLimits{MiB});
    REQUIRE_FALSE(partial);
    CHECK((partial.error().code == std::errc::protocol_error));
    CHECK(partial.error().message == "truncated chunk header: got " + std::to_string(n) + " of 12 bytes");
  }
}

TEST_CASE("malformed chunks are refused with the offset named") {
  const ChunkLimits limits{64 * MiB};
  CHECK(decode_error({1048577, 512}, limits) == "chunk at offset 1048577: offset is not a multiple of 512");
  CHECK(decode_error({1048576, 1000}, limits) == "chunk at offset 1048576: length 1000 is not a multiple of 512");
  CHECK(decode_error({4096, 0}, limits) ==
        "chunk at offset 4096: zero length is only valid for the terminator (offset 0)");
  CHECK(decode_error({0, 2 * MiB + 512}, limits) ==
        "chunk at offset 0: length 2097664 exceeds the maximum chunk length 2097152");
  CHECK(decode_error({64 * MiB - 512, 1024}, limits) ==
        "chunk at offset 67108352: length 1024 ends at 67109376, beyond the image size 67108864");
  CHECK(decode_error({64 * MiB, 512}, limits) ==
        "chunk at offset 67108864: length 512 ends at 67109376, beyond the image size 67108864");
  CHECK(decode_error({u64_max - 511, 1024}, ChunkLimits{u64_max}) ==
        "chunk at offset 18446744073709551104: length 1024 overflows a 64-bit offset");
  // Ending exactly at 2^64 is already past every representable offset.
  CHECK(decode_error({u64_max - 511, 512}, ChunkLimits{u64_max}) ==
        "chunk at offset 18446744073709551104: length 512 overflows a 64-bit offset");
}

TEST_CASE("a chunk may end exactly at the image's end") {
  const ChunkLimits limits{64 * MiB};
  CHECK(decode_chunk_header(*encode_chunk_header({64 * MiB - 2 * MiB, 2 * MiB}), limits));
  CHECK(decode_chunk_header(*encode_chunk_header({64 * MiB - 512, 512}), limits));
}

TEST_CASE("an image that is not a whole number of sectors takes its padded last sector") {
  const ChunkLimits limits{1000};
  CHECK(validate_chunk_header({0, 1024}, limits));
  CHECK(validate_chunk_header({512, 512}, limits));
  auto past = validate_chunk_header({1024, 512}, limits);
  REQUIRE_FALSE(past);
  CHECK(past.error().message == "chunk at offset 1024: length 512 ends at 1536, beyond the image size 1000");
  CHECK_FALSE(validate_chunk_header({0, 1536}, limits));
}

TEST_CASE("the maximum chunk length is configurable up to the ceiling") {
  ChunkLimits tolerant{u64_max, 8 * MiB};
  CHECK(check_chunk_limits(tolerant));
  CHECK(validate_chunk_header({0, 8 * MiB}, tolerant));
  CHECK_FALSE(validate_chunk_header({0, 8 * MiB + 512}, tolerant));

  CHECK(check_chunk_limits(ChunkLimits{u64_max, max_chunk_length_ceiling}));
  auto over = check_chunk_limits(ChunkLimits{u64_max, 64 * MiB});
  REQUIRE_FALSE(over);
  CHECK(over.error().message == "maximum chunk length 67108864 exceeds the ceiling of 33554432");
  auto zero = check_chunk_limits(ChunkLimits{u64_max, 0});
  REQUIRE_FALSE(zero);
  CHECK(zero.error().message == "maximum chunk length 0 is not a positive multiple of 512");
  CHECK_FALSE(check_chunk_limits(ChunkLimits{u64_max, 1000}));

  // A misconfigured limit still cannot lift the ceiling.
  ChunkLimits misconfigured{u64_max, 64 * MiB};
  CHECK(validate_chunk_header({0, 32 * MiB}, misconfigured));
  auto huge = validate_chunk_header({0, 32 * MiB + 512}, misconfigured);
  REQUIRE_FALSE(huge);
  CHECK(huge.error().message == "chunk at offset 0: length 33554944 exceeds the maximum chunk length 33554432");
}
