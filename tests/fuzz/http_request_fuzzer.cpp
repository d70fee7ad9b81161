// libFuzzer target: what an HTTP client sends the import receiver (`sluice serve
// --http`), read by HttpRequestParser as protocols/http/import_server.cpp does: the
// request head up to the blank line, the body's bytes left alone. Fed whole and in
// small pieces, the verdict and the head must be the same.
#include <cstddef>
#include <cstdint>

#include "protocols/http/request_parser.hpp"
#include "tests/fuzz/head_feeding.hpp"

using namespace sluice;

namespace {

bool same_head(const HttpRequestHead& a, const HttpRequestHead& b) {
  if (a.method != b.method || a.target != b.target || a.version != b.version) return false;
  if (a.headers.all().size() != b.headers.all().size()) return false;
  for (std::size_t i = 0; i < a.headers.all().size(); ++i)
    if (a.headers.all()[i].name != b.headers.all()[i].name || a.headers.all()[i].value != b.headers.all()[i].value)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  HttpRequestParser whole;
  HttpRequestParser split;
  const auto a = fuzz::feed_in_pieces(whole, bytes, [](std::size_t) { return std::string_view::npos; });
  const auto b = fuzz::feed_in_pieces(split, bytes, [](std::size_t i) { return 1 + i % 13; });
  fuzz::require_same(a, b);
  if (!a.done) return 0;
  fuzz::require_head_end(bytes, a.taken);
  FUZZ_REQUIRE(same_head(whole.request(), split.request()));
  const HttpRequestHead& head = whole.request();
  FUZZ_REQUIRE(head.path().size() + (head.query().empty() ? 0 : head.query().size() + 1) <= head.target.size());
  (void)head.headers.find("content-length");
  return 0;
}
