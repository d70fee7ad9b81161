#include <doctest/doctest.h>

#include <string>

#include "apps/sluice/json_writer.hpp"

using sluice::cli::json_escape;

TEST_CASE("JSON escaping of quotes, backslashes and control characters") {
  CHECK(json_escape("a\"b\\c") == "a\\\"b\\\\c");
  CHECK(json_escape("line\nnext\ttab\r") == "line\\nnext\\ttab\\r");
  CHECK(json_escape(std::string("nul\0x", 5)) == "nul\\u0000x");
  CHECK(json_escape("\x1f") == "\\u001f");
  CHECK(json_escape("\x7f") == "\x7f");  // DEL needs no escape
}

TEST_CASE("well-formed UTF-8 passes through unchanged") {
  CHECK(json_escape("disque-\xc3\xa9t\xc3\xa9.img") == "disque-\xc3\xa9t\xc3\xa9.img");  // é, 2 bytes
  CHECK(json_escape("\xe2\x82\xac") == "\xe2\x82\xac");                                  // €, 3 bytes
  CHECK(json_escape("\xf0\x9f\x92\xbe") == "\xf0\x9f\x92\xbe");                          // U+1F4BE, 4 bytes
  CHECK(json_escape("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");                          // U+10FFFF
}

TEST_CASE("bytes that are not UTF-8 become U+FFFD, one per byte, and the rest survives") {
  CHECK(json_escape("caf\xe9.img") == "caf\\ufffd.img");                  // Latin-1 é
  CHECK(json_escape("\x80") == "\\ufffd");                                // a lone continuation byte
  CHECK(json_escape("\xc3") == "\\ufffd");                                // truncated at the end
  CHECK(json_escape("\xc3x") == "\\ufffdx");                              // truncated mid-string
  CHECK(json_escape("\xc0\xaf") == "\\ufffd\\ufffd");                     // overlong '/'
  CHECK(json_escape("\xe0\x80\xaf") == "\\ufffd\\ufffd\\ufffd");          // overlong, 3 bytes
  CHECK(json_escape("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");          // a UTF-16 surrogate
  CHECK(json_escape("\xf4\x90\x80\x80") == "\\ufffd\\ufffd\\ufffd\\ufffd");  // beyond U+10FFFF
  CHECK(json_escape("\xff\xfe") == "\\ufffd\\ufffd");
}
