#include "engine/printable.hpp"

#include <doctest/doctest.h>

using sluice::printable;

TEST_CASE("printable: control bytes become \\xNN, the rest passes") {
  CHECK(printable("disk.img") == "disk.img");
  CHECK(printable("") == "");
  CHECK(printable("a\nsluice: forged line") == "a\\x0asluice: forged line");
  CHECK(printable("\x1b[2Jclear") == "\\x1b[2Jclear");
  CHECK(printable(std::string_view("nul\0end", 7)) == "nul\\x00end");
  CHECK(printable("tab\there\r\x7f") == "tab\\x09here\\x0d\\x7f");
  CHECK(printable("caf\xc3\xa9 \xff") == "caf\xc3\xa9 \xff");  // bytes >= 0x80 are not control
  CHECK(printable("back\\slash") == "back\\slash");
}
