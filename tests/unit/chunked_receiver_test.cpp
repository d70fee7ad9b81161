#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "memory_endpoints.hpp"
#include "memory_stream.hpp"
#include "protocols/chunked/chunk_header.hpp"
#include "protocols/chunked/chunked_receiver.hpp"
#include "run_loop.hpp"
#include "wire_bytes.hpp"

using namespace sluice;

namespace {

void add_chunk(std::vector<std::byte>& out, std::uint64_t offset, std::uint32_t length, std::byte fill) {
  auto header = encode_chunk_header(ChunkHeader{offset, length});
  REQUIRE(header);
  out.insert(out.end(), header->begin(), header->end());
  out.insert(out.end(), length, fill);
}

void add_terminator(std::vector<std::byte>& out) {
  out.insert(out.end(), chunk_terminator_bytes.begin(), chunk_terminator_bytes.end());
}

struct Outcome {
  Result<ReceiveResult> result;
  std::unique_ptr<test::CheckingSink> sink;
  bool aborted = false;
};

Outcome receive(std::vector<std::byte> input, std::uint64_t image_size, std::size_t read_piece = 777,
                std::optional<std::size_t> drop_after = {}, std::optional<std::uint64_t> fail_write_at = {}) {
  auto sink = std::make_unique<test::CheckingSink>(image_size);
  sink->fail_write_at = fail_write_at;
  test::MemoryStream stream(std::move(input), read_piece);
  stream.drop_after = drop_after;
  StreamReader reader(stream);
  ReceiveOptions options;
  options.image_size = image_size;
  auto result = test::run(receive_chunked(reader, *sink, options));
  return Outcome{std::move(result), std::move(sink), stream.aborted};
}

// Storage slower than the network, so the reader gets ahead and writes overlap even in
// a sanitizer build.
class SlowSink final : public test::CheckingSink {
 public:
  using CheckingSink::CheckingSink;
  awaitable<Status> write(std::uint64_t offset, Buffer data) override {
    max_pending = std::max(max_pending, ++pending);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await t.async_wait(use_nothrow);
    Status status = co_await CheckingSink::write(offset, std::move(data));
    --pending;
    co_return status;
  }
  std::size_t pending = 0, max_pending = 0;
};

std::string message(const Outcome& o) { return o.result ? std::string("(success)") : o.result.error().message; }

}  // namespace

TEST_CASE("Chunked receiver: writes every chunk with several writes in flight, flushes, then succeeds") {
  const std::uint64_t size = 40u << 20;
  std::vector<std::byte> input;
  for (std::uint64_t off = 0; off < size; off += 2u << 20)
    add_chunk(input, off, 2u << 20, std::byte(static_cast<unsigned char>(1 + off / (2u << 20))));
  add_terminator(input);
  SlowSink sink(size);
  test::MemoryStream stream(input, 65536);
  StreamReader reader(stream);
  ReceiveOptions options;
  options.image_size = size;
  Outcome o{test::run(receive_chunked(reader, sink, options)), nullptr, stream.aborted};
  REQUIRE(o.result);
  CHECK(o.result->bytes_written == size);
  CHECK(o.result->writes == 20);
  CHECK(sink.flushed);
  CHECK(sink.finished);
  CHECK(sink.max_pending > 1);
  CHECK(sink.max_pending <= ReceiveOptions::default_depth);
  CHECK(sink.corruptions == 0);
  for (std::uint64_t off = 0; off < size; off += 2u << 20)
    CHECK(sink.image[off + 12345] == std::byte(static_cast<unsigned char>(1 + off / (2u << 20))));
}

TEST_CASE("Chunked receiver: headers split across reads, small chunks, overlapping chunks in stream order") {
  std::vector<std::byte> input;
  add_chunk(input, 0, 1024, std::byte{0xAA});
  add_chunk(input, 512, 512, std::byte{0xBB});  // overlaps: the later chunk wins
  add_chunk(input, 4096, 512, std::byte{0xCC});
  add_terminator(input);
  auto o = receive(input, 8192, 5);
  REQUIRE(o.result);
  CHECK(o.sink->image[0] == std::byte{0xAA});
  CHECK(o.sink->image[511] == std::byte{0xAA});
  CHECK(o.sink->image[512] == std::byte{0xBB});
  CHECK(o.sink->image[4096] == std::byte{0xCC});
  CHECK(o.sink->image[2048] == std::byte{0xEE});  // never written: the receiver does not zero-fill
}

TEST_CASE("Chunked receiver: a chunk into the padding of a partial last sector writes only the image's part") {
  std::vector<std::byte> input;
  add_chunk(input, 1024, 512, std::byte{0x42});
  add_terminator(input);
  auto o = receive(input, 1300);
  REQUIRE(o.result);
  CHECK(o.result->bytes_written == 276);
  CHECK(o.sink->image.size() == 1300);
  CHECK(o.sink->image[1299] == std::byte{0x42});
}

TEST_CASE("Chunked receiver: every malformed stream ends with a clear error; written data stays") {
  const std::uint64_t size = 1u << 20;
  std::vector<std::byte> good;
  add_chunk(good, 0, 4096, std::byte{0x11});

  struct Case {
    const char* name;
    std::vector<std::byte> tail;
    const char* expected;
  };
  std::vector<std::byte> unaligned_offset, unaligned_length, oversize, beyond, zero_length, cut_payload;
  {
    auto h = encode_chunk_header(ChunkHeader{100, 512});
    unaligned_offset.assign(h->begin(), h->end());
    h = encode_chunk_header(ChunkHeader{8192, 1000});
    unaligned_length.assign(h->begin(), h->end());
    h = encode_chunk_header(ChunkHeader{0, 4u << 20});
    oversize.assign(h->begin(), h->end());
    h = encode_chunk_header(ChunkHeader{size, 512});
    beyond.assign(h->begin(), h->end());
    h = encode_chunk_header(ChunkHeader{8192, 0});
    zero_length.assign(h->begin(), h->end());
    h = encode_chunk_header(ChunkHeader{8192, 4096});
    cut_payload.assign(h->begin(), h->end());
    cut_payload.insert(cut_payload.end(), 1000, std::byte{0x22});
  }
  std::vector<std::byte> after_terminator;
  add_terminator(after_terminator);
  after_terminator.insert(after_terminator.end(), 100, std::byte{0x33});
  std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<std::byte> garbage(reinterpret_cast<const std::byte*>(http.data()),
                                 reinterpret_cast<const std::byte*>(http.data() + http.size()));
  std::vector<Case> cases{
      {"truncated: no terminator", {}, "without the terminator"},
      {"cut inside a header", test::wire("00000100 000000"), "inside a chunk header"},
      {"cut inside a payload", cut_payload, "inside the payload (1000 of 4096 bytes)"},
      {"unaligned offset", unaligned_offset, "chunk at offset 100: offset is not a multiple of 512"},
      {"unaligned length", unaligned_length, "length 1000 is not a multiple of 512"},
      {"oversize chunk", oversize, "exceeds the maximum chunk length"},
      {"out of bounds", beyond, "beyond the image size"},
      {"zero length, not the terminator", zero_length, "zero length is only valid for the terminator"},
      {"garbage (an HTTP request without --http)", garbage, "chunk at offset"},
      {"bytes after the terminator", after_terminator,
       "bytes follow the Chunked end marker at stream byte 4108 (at least "},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::vector<std::byte> input = good;
    input.insert(input.end(), c.tail.begin(), c.tail.end());
    auto o = receive(input, size);
    REQUIRE_FALSE(o.result);
    CHECK_MESSAGE(message(o).find(c.expected) != std::string::npos, message(o));
    CHECK(o.sink->image[4095] == std::byte{0x11});  // the good chunk before it was written
    CHECK_FALSE(o.sink->flushed);                   // and no success was implied
  }
}

TEST_CASE("Chunked receiver: a raw image that starts with 12 zero bytes is not taken for an empty stream") {
  // What a raw sender into a Chunked receiver looks like: the zeros read as the end
  // marker, and the rest of the image follows it.
  std::vector<std::byte> raw(8192, std::byte{0});
  raw[12] = std::byte{0x44};
  auto o = receive(raw, 1u << 20);
  REQUIRE_FALSE(o.result);
  CHECK_MESSAGE(message(o).find("bytes follow the Chunked end marker at stream byte 0") != std::string::npos,
                message(o));
  CHECK_FALSE(o.sink->flushed);
}

TEST_CASE("Chunked receiver: a dropped connection mid-payload is an error naming the chunk") {
  std::vector<std::byte> input;
  add_chunk(input, 0, 65536, std::byte{1});
  add_chunk(input, 65536, 65536, std::byte{2});
  add_terminator(input);
  auto o = receive(input, 1u << 20, 4096, 12 + 65536 + 12 + 3000);
  REQUIRE_FALSE(o.result);
  CHECK(message(o).find("chunk at offset 65536") != std::string::npos);
  CHECK(message(o).find("reset") != std::string::npos);
  CHECK(o.sink->image[100] == std::byte{1});
}

TEST_CASE("Chunked receiver: a failed write stops the transfer, aborts the stream and is the error reported") {
  std::vector<std::byte> input;
  for (std::uint64_t off = 0; off < (16u << 20); off += 1u << 20) add_chunk(input, off, 1u << 20, std::byte{7});
  add_terminator(input);
  auto o = receive(input, 16u << 20, 65536, {}, 3u << 20);
  REQUIRE_FALSE(o.result);
  CHECK(message(o).find("No space left on device") != std::string::npos);
  CHECK(o.aborted);
  CHECK_FALSE(o.sink->flushed);
}
