// libFuzzer target: sizes as a user types them (--size, --piece, --max-chunk...), read
// by parse_size. A user reaches it only through the command line, but a server
// launched by a script passes on what the script got. An accepted size reads back the
// same when written as a plain number.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/size_parse.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace sluice;
using sluice::fuzz::accepted;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto value = parse_size(text);
  if (!accepted(value)) return 0;
  auto again = parse_size(std::to_string(*value));
  FUZZ_REQUIRE(again && *again == *value);
  FUZZ_REQUIRE(!format_size(*value).empty());
  return 0;
}
