// libFuzzer target: URIs (nbd://, nbds+unix://, http(s)://...) read by parse_uri. They
// come from the command line, never from a peer (redirects are not followed), but an
// orchestrator passes on whatever it was given. A URI accepted for connecting is
// accepted alike for listening (which only adds port 0).
#include <cstddef>
#include <cstdint>

#include "engine/uri.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using sluice::fuzz::accepted;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)has_scheme(text);
  FUZZ_REQUIRE(percent_decode(text).size() <= text.size());
  auto listen = parse_uri(text, PortZero::allowed);
  auto connect = parse_uri(text, PortZero::refused);
  if (!accepted(listen)) {
    FUZZ_REQUIRE(!accepted(connect));
    return 0;
  }
  if (accepted(connect)) {
    FUZZ_REQUIRE(connect->scheme == listen->scheme && connect->host == listen->host &&
                 connect->port == listen->port && connect->path == listen->path);
    FUZZ_REQUIRE(connect->port != 0);
  } else {
    FUZZ_REQUIRE(listen->port == 0);
  }
  FUZZ_REQUIRE(!listen->authority().empty() || listen->host.empty());
  for (const auto& [name, value] : listen->params) FUZZ_REQUIRE(listen->param(name).has_value());
  return 0;
}
