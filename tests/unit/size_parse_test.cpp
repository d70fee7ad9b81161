#include <doctest/doctest.h>

#include "engine/size_parse.hpp"

using namespace sluice;

TEST_CASE("human sizes") {
  CHECK(parse_size("512") == 512u);
  CHECK(parse_size("64k") == 65536u);
  CHECK(parse_size("64K") == 65536u);
  CHECK(parse_size("2M") == 2u << 20);
  CHECK(parse_size("2MiB") == 2u << 20);
  CHECK(parse_size("1G") == 1ull << 30);
  CHECK(parse_size("1.5G") == 3ull << 29);
  CHECK(parse_size("4T") == 4ull << 40);
  CHECK(parse_size("0") == 0u);
}

TEST_CASE("bad sizes") {
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("M"));
  CHECK_FALSE(parse_size("12Q"));
  CHECK_FALSE(parse_size("1.2.3"));
  CHECK_FALSE(parse_size("0.3"));  // not a whole number of bytes
  CHECK_FALSE(parse_size("99999999999E"));
  CHECK_FALSE(parse_size("-1"));
}

TEST_CASE("format_size") {
  CHECK(format_size(100) == "100 B");
  CHECK(format_size(2u << 20) == "2.0 MiB");
}
