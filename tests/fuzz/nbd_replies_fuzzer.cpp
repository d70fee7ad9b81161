// libFuzzer target: what an NBD server sends during transmission, decoded as the
// client does (protocols/nbd/client/reply_reader.cpp): simple replies and structured
// reply chunks (OFFSET_DATA, OFFSET_HOLE, BLOCK_STATUS, errors) to one request in
// flight, READ replies judged by the ReadReplyAssembler.
//
// Input: the request (8 bytes offset, 4 bytes length, 1 byte command: 0 READ, 4 READ
// with DF, 1 BLOCK_STATUS, else WRITE), then the server's bytes. Whatever the
// assembler accepts is checked against an independent map of the request's bytes: a
// range it lets through is where the client writes the data.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "protocols/nbd/reply_assembler.hpp"
#include "protocols/nbd/transmission_messages.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using namespace sluice::nbd;
using sluice::fuzz::accepted;

namespace {

std::uint64_t load_be(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (std::byte b : bytes) value = value << 8 | std::to_integer<std::uint64_t>(b);
  return value;
}

// The request's bytes, one flag each, for requests small enough to map.
class Coverage {
 public:
  Coverage(std::uint64_t offset, std::uint32_t length) : offset_(offset), length_(length) {
    if (length <= max_mapped) covered_.assign(length, false);
  }
  void add(const ContentRange& range) {
    // The client writes range.length bytes at range.offset - offset into its buffer.
    FUZZ_REQUIRE(range.offset >= offset_ && range.offset - offset_ <= length_ &&
                 range.length <= length_ - (range.offset - offset_));
    if (length_ > max_mapped) return;
    for (std::uint64_t i = range.offset - offset_; i < range.offset - offset_ + range.length; ++i) {
      FUZZ_REQUIRE(!covered_[i]);
      covered_[i] = true;
    }
  }
  bool complete() const {
    for (bool b : covered_)
      if (!b) return false;
    return true;
  }

 private:
  static constexpr std::uint32_t max_mapped = 1u << 16;
  std::uint64_t offset_;
  std::uint32_t length_;
  std::vector<bool> covered_;
};

struct Request {
  Command command = Command::read;
  bool df = false;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

// One READ reply chunk; false when the client would drop the connection.
bool read_chunk(fuzz::WireInput& in, const ChunkHeader& header, ReadReplyAssembler& assembler, Coverage& coverage) {
  if (!accepted(assembler.check_chunk(header))) return false;
  switch (header.type) {
    case ReplyType::offset_data: {
      auto payload = in.take_exactly(header.length);
      if (!payload) return false;
      auto range = decode_offset_data_prefix(payload->first(offset_data_prefix_size), header.length);
      if (!accepted(range)) return false;
      auto whole = decode_offset_data(*payload);
      FUZZ_REQUIRE(whole && whole->offset == range->offset && whole->data.size() == range->length);
      if (!accepted(assembler.add_data(*range))) return false;
      coverage.add(*range);
      break;
    }
    case ReplyType::offset_hole: {
      auto payload = in.take_exactly(header.length);
      if (!payload) return false;
      auto range = decode_offset_hole(*payload);
      if (!accepted(range)) return false;
      if (!accepted(assembler.add_hole(*range))) return false;
      coverage.add(*range);
      break;
    }
    case ReplyType::none: break;
    default: {
      auto payload = in.take_exactly(header.length);
      if (!payload) return false;
      auto chunk = decode_error_chunk(header.type, *payload);
      if (!accepted(chunk)) return false;
      FUZZ_REQUIRE(chunk->error != Errno::none);
      if (!accepted(assembler.add_error(*chunk))) return false;
      break;
    }
  }
  if (header.done()) {
    const std::uint64_t covered = assembler.covered_bytes();
    if (accepted(assembler.finish())) {
      FUZZ_REQUIRE(covered == assembler.covered_bytes());
      FUZZ_REQUIRE(coverage.complete());
    }
    FUZZ_REQUIRE(!accepted(assembler.finish()));  // DONE twice
  }
  return true;
}

// A BLOCK_STATUS or other chunk; false when the client would drop the connection.
bool other_chunk(fuzz::WireInput& in, const ChunkHeader& header, const Request& request) {
  if (header.type == ReplyType::none) return true;
  if (header.type == ReplyType::block_status && request.command == Command::block_status) {
    auto payload = in.take_exactly(header.length);
    if (!payload) return false;
    auto status = decode_block_status(*payload);
    if (!accepted(status)) return false;
    FUZZ_REQUIRE(status->descriptors.size() * 8 + 4 == header.length);
    auto extents = to_extents(status->descriptors, request.offset);
    if (!accepted(extents)) return false;
    std::uint64_t at = request.offset;
    for (const Extent& e : *extents) {
      FUZZ_REQUIRE(e.offset == at && e.length > 0 && e.length <= ~std::uint64_t{0} - at);
      at += e.length;
    }
    return true;
  }
  if (!is_error(header.type)) return false;
  auto payload = in.take_exactly(header.length);
  return payload && accepted(decode_error_chunk(header.type, *payload));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::WireInput in(data, size);
  Request request;
  request.offset = load_be(in.take(8));
  request.length = static_cast<std::uint32_t>(load_be(in.take(4)));
  const unsigned command = in.take_byte();
  request.command = (command & 3) == 0 ? Command::read : (command & 3) == 1 ? Command::block_status : Command::write;
  request.df = request.command == Command::read && (command & 4) != 0;

  std::optional<ReadReplyAssembler> assembler;
  std::optional<Coverage> coverage;
  auto start = [&] {
    assembler.emplace(request.offset, request.length, request.df);
    coverage.emplace(request.offset, request.length);
  };
  start();
  while (true) {
    std::array<std::byte, chunk_header_size> head{};
    auto first = in.take(simple_reply_header_size);
    if (first.size() < simple_reply_header_size) return 0;
    std::copy(first.begin(), first.end(), head.begin());
    auto kind = decode_reply_magic(first);
    if (!accepted(kind)) return 0;
    if (*kind == ReplyKind::simple) {
      auto reply = decode_simple_reply_header(first);
      if (!accepted(reply)) return 0;
      if (reply->error == Errno::none && request.command == Command::read && !in.take_exactly(request.length))
        return 0;
      start();  // the request is complete; the next one is alike
      continue;
    }
    auto rest = in.take(chunk_header_size - simple_reply_header_size);
    std::copy(rest.begin(), rest.end(), head.begin() + simple_reply_header_size);
    auto header = decode_chunk_header(std::span(head).first(first.size() + rest.size()));
    if (!accepted(header)) return 0;
    const bool ok = request.command == Command::read ? read_chunk(in, *header, *assembler, *coverage)
                                                     : other_chunk(in, *header, request);
    if (!ok) return 0;
    if (header->done()) start();
  }
}
