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
  CHECK(printable("caf\xc3\xa9 \xff") == "caf\xc3\xa9 \\xff");  // UTF-8 passes, a stray byte does not
  CHECK(printable("back\\slash") == "back\\slash");
}

TEST_CASE("printable: only well-formed UTF-8 passes, without C1 controls") {
  CHECK(printable("\xf0\x9f\x98\x80 \xe2\x82\xac \xf4\x8f\xbf\xbf") == "\xf0\x9f\x98\x80 \xe2\x82\xac \xf4\x8f\xbf\xbf");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");              // an overlong '/'
  CHECK(printable("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");      // overlong, three bytes
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");      // a UTF-16 surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");              // cut short at the end
  CHECK(printable("\xe2\x82x") == "\\xe2\\x82x");            // cut short by ASCII
  CHECK(printable("\xc2\x9b[2J") == "\\xc2\\x9b[2J");          // U+009B, an 8-bit CSI
  CHECK(printable("\xc2\xa0") == "\xc2\xa0");                  // U+00A0 is text
}
