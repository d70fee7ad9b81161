#include "storage/vhd/parent_locator.hpp"

#include <doctest/doctest.h>

#include <cstring>

#include "storage/vhd/utf16.hpp"
#include "wire_bytes.hpp"

using namespace sluice::vhd;
using sluice::test::wire;

namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> utf16le(std::string_view ascii) {
  std::vector<std::byte> out;
  for (char c : ascii) {
    out.push_back(static_cast<std::byte>(c));
    out.push_back(std::byte{0});
  }
  return out;
}

}  // namespace

TEST_CASE("MacX: a file:// URL, relative or absolute, percent-decoded, cut at NUL") {
  auto p = decode_parent_locator(platform_macx, bytes_of(std::string("file://./base.vhd\0junk", 22)));
  REQUIRE(p);
  REQUIRE(*p);
  CHECK((*p)->path == "./base.vhd");
  CHECK_FALSE((*p)->foreign_absolute);
  p = decode_parent_locator(platform_macx, bytes_of("file:///var/my%20vms/base.vhd"));
  CHECK((*p)->path == "/var/my vms/base.vhd");
  p = decode_parent_locator(platform_macx, bytes_of("file://localhost/srv/base.vhd"));
  CHECK((*p)->path == "/srv/base.vhd");
  p = decode_parent_locator(platform_macx, bytes_of("file://base%2"));
  CHECK((*p)->path == "base%2");
  CHECK(decode_parent_locator(platform_macx, bytes_of("/srv/base.vhd")).error().message ==
        "the MacX locator '/srv/base.vhd' is not a file:// URL");
  CHECK(decode_parent_locator(platform_macx, bytes_of("file://")).error().message ==
        "the MacX locator 'file://' names no file");
}

TEST_CASE("W2ru and W2ku: UTF-16LE Windows paths") {
  auto p = decode_parent_locator(platform_w2ru, utf16le(".\\dir\\base.vhd"));
  REQUIRE(p);
  CHECK((*p)->path == "./dir/base.vhd");
  CHECK_FALSE((*p)->foreign_absolute);
  p = decode_parent_locator(platform_w2ku, utf16le("C:\\images\\base.vhd"));
  CHECK((*p)->path == "C:/images/base.vhd");
  CHECK((*p)->foreign_absolute);
  p = decode_parent_locator(platform_w2ku, utf16le("\\\\?\\D:\\x.vhd"));
  CHECK((*p)->path == "D:/x.vhd");
  CHECK((*p)->foreign_absolute);
  CHECK_FALSE(decode_parent_locator(platform_w2ku, utf16le("")));
}

TEST_CASE("other platform codes name nothing to follow") {
  auto p = decode_parent_locator(0x57693272, utf16le("C:\\old.vhd"));  // Wi2r
  REQUIRE(p);
  CHECK_FALSE(*p);
  CHECK(platform_name(platform_w2ru) == "W2ru");
  CHECK(platform_name(0x01020304) == "0x01020304");
}

TEST_CASE("UTF-16 decoding: byte orders, the BOM, surrogates") {
  CHECK(utf16_to_utf8(wire("0041 00e9 20ac"), ByteOrder::big) == "A\xc3\xa9\xe2\x82\xac");
  CHECK(utf16_to_utf8(wire("4100 e900"), ByteOrder::little) == "A\xc3\xa9");
  CHECK(utf16_to_utf8(wire("fffe 4100"), ByteOrder::big) == "A");  // a little-endian BOM wins
  CHECK(utf16_to_utf8(wire("d83d de00"), ByteOrder::big) == "\xf0\x9f\x98\x80");
  CHECK(utf16_to_utf8(wire("d83d 0041"), ByteOrder::big) == "\xef\xbf\xbd" "A");
  CHECK(utf16_to_utf8(wire("0041 0000 0042"), ByteOrder::big) == "A");
}
