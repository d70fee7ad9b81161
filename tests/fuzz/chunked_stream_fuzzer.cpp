// libFuzzer target: a Chunked stream as a sender sends it, framed as the receiver
// does (protocols/chunked/chunked_receiver.cpp): 12-byte headers, each validated
// before its payload is taken, until the terminator. The same bytes are read against
// a few destinations; every chunk accepted must be one the receiver can write: inside
// the image (its last sector may run into the padding), aligned, within the limit.
#include <cstddef>
#include <cstdint>

#include "protocols/chunked/chunk_header.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using sluice::fuzz::accepted;

namespace {

constexpr ChunkLimits destinations[] = {
    {1u << 20, default_max_chunk_length},              // 1 MiB image, vhd-tool's 2 MiB chunks
    {(1u << 20) + 100, 4096},                          // a partial last sector, small chunks
    {~std::uint64_t{0} - 1000, max_chunk_length_ceiling},  // near 2^64, the largest chunks
};

void receive(std::span<const std::byte> stream, const ChunkLimits& limits) {
  fuzz::WireInput in(reinterpret_cast<const std::uint8_t*>(stream.data()), stream.size());
  const std::uint64_t padded = limits.image_size + (512 - limits.image_size % 512) % 512;  // may wrap to 0
  while (true) {
    auto bytes = in.take(chunk_header_size);
    auto header = decode_chunk_header(bytes, limits);
    if (!accepted(header)) return;
    auto raw = read_chunk_header(bytes);
    FUZZ_REQUIRE(raw && *raw == *header);
    if (header->is_terminator()) return;
    FUZZ_REQUIRE(header->offset % chunk_sector_size == 0 && header->length % chunk_sector_size == 0);
    FUZZ_REQUIRE(header->length > 0 && header->length <= limits.max_length);
    // What the receiver writes: the part inside the image, never nothing.
    FUZZ_REQUIRE(header->offset < limits.image_size);
    FUZZ_REQUIRE(padded == 0 || header->length <= padded - header->offset);
    auto encoded = encode_chunk_header(*header);
    FUZZ_REQUIRE(encoded && std::equal(encoded->begin(), encoded->end(), bytes.begin()));
    if (!in.take_exactly(header->length)) return;  // the stream ended inside the payload
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data), size);
  for (const ChunkLimits& limits : destinations) receive(stream, limits);
  return 0;
}
