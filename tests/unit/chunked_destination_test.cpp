#include <doctest/doctest.h>

#include <cstring>
#include <map>

#include "engine/copier.hpp"
#include "memory_endpoints.hpp"
#include "memory_stream.hpp"
#include "protocols/chunked/chunked_destination.hpp"
#include "protocols/common/zero_block.hpp"
#include "run_loop.hpp"
#include "wire_bytes.hpp"

using namespace sluice;

namespace {

struct DecodedChunk {
  ChunkHeader header;
  std::vector<std::byte> payload;
};

// Decodes a whole sent stream with the receiver's rules; `terminated` says whether the
// terminator ended it (and nothing followed).
struct Decoded {
  std::vector<DecodedChunk> chunks;
  bool terminated = false;
};

Decoded decode_stream(const std::vector<std::byte>& bytes, std::uint64_t image_size) {
  Decoded out;
  std::size_t at = 0;
  ChunkLimits limits{image_size, default_max_chunk_length};
  while (at + chunk_header_size <= bytes.size()) {
    auto header = decode_chunk_header(std::span(bytes).subspan(at, chunk_header_size), limits);
    REQUIRE(header);
    at += chunk_header_size;
    if (header->is_terminator()) {
      out.terminated = at == bytes.size();
      return out;
    }
    REQUIRE(at + header->length <= bytes.size());
    out.chunks.push_back({*header, {bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                    bytes.begin() + static_cast<std::ptrdiff_t>(at + header->length)}});
    at += header->length;
  }
  return out;
}

// The image a receiver would write: chunks applied in order, clipped at the end.
std::vector<std::byte> apply(const Decoded& decoded, std::uint64_t image_size) {
  std::vector<std::byte> image(image_size, std::byte{0});
  for (const auto& c : decoded.chunks) {
    std::uint64_t n = std::min<std::uint64_t>(c.header.length, image_size - c.header.offset);
    std::memcpy(image.data() + c.header.offset, c.payload.data(), n);
  }
  return image;
}

Buffer filled(std::size_t size, std::byte value) {
  Buffer b = Buffer::allocate(size, 4096);
  std::fill(b.writable().begin(), b.writable().end(), value);
  return b;
}

awaitable<Result<TransferStats>> copy_to(test::MemorySource& source, Destination& destination, bool prezeroed) {
  CopyOptions options;
  options.destination_is_zero = prezeroed;
  co_return co_await copy(source, destination, options);
}

}  // namespace

TEST_CASE("Chunked destination: golden bytes for data, zeros, the padded last sector and the terminator") {
  auto memory = std::make_unique<test::MemoryStream>();
  auto* stream = memory.get();
  ChunkedDestination destination(std::move(memory), 1300, "test");
  auto task = [&]() -> awaitable<Status> {
    if (Status s = co_await destination.write(0, filled(512, std::byte{0x41})); !s) co_return s;
    if (Status s = co_await destination.zero(512, 512, ZeroMode::may_punch); !s) co_return s;
    // 276 bytes end the 1300-byte image: padded on the wire to one 512-byte sector.
    if (Status s = co_await destination.write(1024, filled(276, std::byte{0x42})); !s) co_return s;
    co_return co_await destination.finish();
  };
  REQUIRE(test::run(task()));

  std::vector<std::byte> expected = test::wire("0000000000000000 00020000");
  expected.insert(expected.end(), 512, std::byte{0x41});
  auto second = test::wire("0002000000000000 00020000");
  expected.insert(expected.end(), second.begin(), second.end());
  expected.insert(expected.end(), 512, std::byte{0});
  auto third = test::wire("0004000000000000 00020000");
  expected.insert(expected.end(), third.begin(), third.end());
  expected.insert(expected.end(), 276, std::byte{0x42});
  expected.insert(expected.end(), 236, std::byte{0});
  auto terminator = test::wire("0000000000000000 00000000");
  expected.insert(expected.end(), terminator.begin(), terminator.end());
  CHECK(test::hex(stream->sent) == test::hex(expected));

  REQUIRE(stream->frames.size() == 4);
  CHECK(stream->frames[0].contiguous);  // the header went into the buffer's headroom
  CHECK(stream->frames[1].body_data == zero_block().data());
  CHECK(stream->closed);
  CHECK_FALSE(stream->aborted);
}

TEST_CASE("Chunked destination: refuses unaligned writes and writes beyond the image") {
  ChunkedDestination destination(std::make_unique<test::MemoryStream>(), 4096, "test");
  auto task = [&]() -> awaitable<Status> {
    Status a = co_await destination.write(100, filled(512, std::byte{1}));
    CHECK_FALSE(a);
    Status b = co_await destination.write(0, filled(700, std::byte{1}));  // not the image's end
    CHECK_FALSE(b);
    Status c = co_await destination.zero(4096, 512, ZeroMode::may_punch);
    CHECK_FALSE(c);
    co_return Status{};
  };
  CHECK(test::run(task()));
}

TEST_CASE("Chunked destination through the copier: the stream rebuilds the image, chunks are aligned, "
          "at most 2 MiB, and every data header sits in front of its payload") {
  const std::uint64_t size = (5u << 20) + 300;
  std::vector<Extent> map{{0, 3u << 20, ExtentKind::data},
                          {3u << 20, 1u << 20, ExtentKind::hole},
                          {4u << 20, 512 * 1024, ExtentKind::zero},
                          {(4u << 20) + 512 * 1024, size - (4u << 20) - 512 * 1024, ExtentKind::data}};
  auto image = test::patterned(size, map);
  for (bool prezeroed : {false, true}) {
    CAPTURE(prezeroed);
    test::MemorySource source(image, map);
    auto memory = std::make_unique<test::MemoryStream>();
    auto* stream = memory.get();
    ChunkedDestination destination(std::move(memory), size, "test");
    auto stats = test::run(copy_to(source, destination, prezeroed));
    REQUIRE(stats);
    Decoded decoded = decode_stream(stream->sent, size);
    CHECK(decoded.terminated);
    CHECK(apply(decoded, size) == image);
    std::uint64_t covered = 0;
    for (const auto& c : decoded.chunks) {
      CHECK(c.header.offset % 512 == 0);
      CHECK(c.header.length % 512 == 0);
      CHECK(c.header.length <= (2u << 20));
      covered += c.header.length;
      bool in_hole = c.header.offset >= (3u << 20) && c.header.offset < (4u << 20) + 512 * 1024;
      if (prezeroed) CHECK_FALSE(in_hole);  // --prezeroed: holes and zeros are not sent
    }
    // Without --prezeroed every byte of the padded image goes out exactly once.
    if (!prezeroed) CHECK(covered == size + (512 - size % 512));
    std::size_t data_frames = 0, contiguous = 0;
    for (const auto& f : stream->frames) {
      if (f.body == 0 || f.body_data == zero_block().data()) continue;
      ++data_frames;
      if (f.contiguous) ++contiguous;
    }
    // All but the padded last sector (a copy of its own) carry their header in headroom.
    CHECK(data_frames >= 3);
    CHECK(contiguous == data_frames - 1);
    REQUIRE(stats->socket_writes);
    CHECK(*stats->socket_writes == stream->stats().socket_writes);
    CHECK(stats->connections == 1u);
  }
}

TEST_CASE("Chunked destination: a failed copy never sends the terminator") {
  const std::uint64_t size = 8u << 20;
  std::vector<Extent> map{{0, size, ExtentKind::data}};
  test::MemorySource source(test::patterned(size, map), map);
  source.fail_read_at = 5u << 20;
  auto memory = std::make_unique<test::MemoryStream>();
  auto* stream = memory.get();
  ChunkedDestination destination(std::move(memory), size, "test");
  auto stats = test::run(copy_to(source, destination, false));
  REQUIRE_FALSE(stats);
  Decoded decoded = decode_stream(stream->sent, size);
  CHECK_FALSE(decoded.terminated);
  CHECK_FALSE(stream->closed);
}

TEST_CASE("Chunked destination: a long zero range is sent as 2 MiB chunks from one shared block") {
  auto memory = std::make_unique<test::MemoryStream>();
  auto* stream = memory.get();
  ChunkedDestination destination(std::move(memory), 5u << 20, "test");
  auto task = [&]() -> awaitable<Status> { co_return co_await destination.zero(0, 5u << 20, ZeroMode::may_punch); };
  REQUIRE(test::run(task()));
  REQUIRE(stream->frames.size() == 3);
  std::map<std::uint64_t, std::uint32_t> chunks;
  for (const auto& c : decode_stream(stream->sent, 5u << 20).chunks) chunks[c.header.offset] = c.header.length;
  CHECK(chunks == std::map<std::uint64_t, std::uint32_t>{{0, 2u << 20}, {2u << 20, 2u << 20}, {4u << 20, 1u << 20}});
  for (const auto& f : stream->frames) CHECK(f.body_data == zero_block().data());
}
