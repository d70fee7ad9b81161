// libFuzzer target: what an import server (xapi, or `sluice serve --http`) answers
// the sender's PUT, read by HttpResponseParser as protocols/http/import_client.cpp
// does: interim 1xx heads skipped, a 2xx head taken up to its blank line, the next
// protocol's bytes left alone. Fed whole and in small pieces, the verdict and the
// head must be the same.
#include <cstddef>
#include <cstdint>

#include "protocols/http/response_parser.hpp"
#include "tests/fuzz/head_feeding.hpp"

using namespace sluice;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  HttpResponseParser whole;
  HttpResponseParser split;
  const auto a = fuzz::feed_in_pieces(whole, bytes, [](std::size_t) { return std::string_view::npos; });
  const auto b = fuzz::feed_in_pieces(split, bytes, [](std::size_t i) { return 1 + i % 13; });
  fuzz::require_same(a, b);
  if (!a.done) return 0;
  fuzz::require_head_end(bytes, a.taken);
  const HttpResponseHead& x = whole.response();
  const HttpResponseHead& y = split.response();
  FUZZ_REQUIRE(x.status_line == y.status_line && x.status == y.status && x.reason == y.reason);
  FUZZ_REQUIRE(x.transfer_encoding_nbd == y.transfer_encoding_nbd);
  FUZZ_REQUIRE(x.headers.all().size() == y.headers.all().size());
  FUZZ_REQUIRE(x.status >= 200 && x.status <= 299);
  return 0;
}
