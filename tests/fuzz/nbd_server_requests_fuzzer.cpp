// libFuzzer target: what an NBD client sends during transmission, decoded as the
// server does (protocols/nbd/server/request_reader.cpp, transmission.cpp): request
// headers, each followed by its WRITE payload, judged by check_request against a few
// exports. A request that passes must lie inside the export and within the limits,
// since the server then touches the image with it.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "protocols/nbd/server/request_checks.hpp"
#include "protocols/nbd/transmission_messages.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using namespace sluice::nbd;
using sluice::fuzz::accepted;

namespace {

TransmissionTerms writable_export() {
  TransmissionTerms terms;
  terms.size = 1u << 20;
  terms.flags = transmission_flag::has_flags | transmission_flag::send_flush | transmission_flag::send_fua |
                transmission_flag::send_trim | transmission_flag::send_write_zeroes | transmission_flag::send_df |
                transmission_flag::send_fast_zero | transmission_flag::send_cache;
  terms.block_sizes = {1, 4096, 32u << 20};
  terms.structured_replies = true;
  terms.allocation_context = true;
  return terms;
}

// Large, sector-aligned, close to 2^64, read-only: the overflow and read-only cases.
TransmissionTerms huge_read_only_export() {
  TransmissionTerms terms;
  terms.size = ~std::uint64_t{0} - 4095;
  terms.flags = transmission_flag::has_flags | transmission_flag::read_only;
  terms.block_sizes = {512, 4096, 1u << 16};
  return terms;
}

// An odd size with a 4 KiB minimum: the last block is partial.
TransmissionTerms odd_export() {
  TransmissionTerms terms;
  terms.size = (1u << 20) + 1000;
  terms.flags = transmission_flag::has_flags | transmission_flag::send_write_zeroes;
  terms.block_sizes = {4096, 4096, 0xffffffffu};
  terms.structured_replies = true;
  return terms;
}

const TransmissionTerms exports[] = {writable_export(), huge_read_only_export(), odd_export()};

void judge(const RequestHeader& request, const TransmissionTerms& terms) {
  auto refusal = check_request(request, terms);
  if (refusal) {
    FUZZ_REQUIRE(!refusal->message.empty());
    FUZZ_REQUIRE(refusal->error != Errno::none);
    return;
  }
  const auto c = request.command;
  if (c == Command::flush || c == Command::disc) {
    FUZZ_REQUIRE(request.offset == 0 && request.length == 0);
    return;
  }
  FUZZ_REQUIRE(request.offset <= terms.size && request.length <= terms.size - request.offset);
  FUZZ_REQUIRE(request.offset % terms.block_sizes.minimum == 0);
  FUZZ_REQUIRE(request.length % terms.block_sizes.minimum == 0);
  if (c == Command::read || c == Command::write || c == Command::cache)
    FUZZ_REQUIRE(request.length <= terms.block_sizes.maximum);
  if (c == Command::write || c == Command::write_zeroes || c == Command::trim)
    FUZZ_REQUIRE(!(terms.flags & transmission_flag::read_only));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::WireInput in(data, size);
  while (true) {
    auto head = in.take(request_header_size);
    auto request = decode_request_header(head);
    if (!accepted(request)) return 0;
    const auto again = encode_request_header(*request);
    FUZZ_REQUIRE(std::equal(again.begin(), again.end(), head.begin(), head.end()));
    for (const TransmissionTerms& terms : exports) judge(*request, terms);
    // The WRITE payload follows whether or not the request is served (a refused one
    // is read and dropped).
    if (request->command == Command::write && !in.take_exactly(request->length)) return 0;
  }
}
