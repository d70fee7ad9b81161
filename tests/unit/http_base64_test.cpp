#include <doctest/doctest.h>

#include "protocols/http/base64.hpp"

using namespace sluice;

TEST_CASE("RFC 4648 section 10 test vectors") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foob") == "Zm9vYg==");
  CHECK(base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64 of Basic credentials and of bytes with the high bit set") {
  CHECK(base64_encode("Aladdin:open sesame") == "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
  CHECK(base64_encode("\xff\xfe\xfd") == "//79");
  CHECK(base64_encode(std::string_view("\0", 1)) == "AA==");
  CHECK(base64_encode("\xfb\xff") == "+/8=");
}
