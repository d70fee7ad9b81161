#include "storage/vhd/vhd_header.hpp"

#include <doctest/doctest.h>

#include "storage/vhd/vhd_bytes.hpp"
#include "wire_bytes.hpp"

using namespace sluice::vhd;
using sluice::test::wire;

namespace {

// The header `qemu-img create -f vpc x.vhd 10M` wrote (qemu 7.2), zeros after it.
std::vector<std::byte> qemu_header() {
  auto bytes = wire(
      "6378737061727365 ffffffffffffffff 0000000000000600 00010000 00000006 00200000 fffff471");
  bytes.resize(header_size);
  return bytes;
}

void put32(std::vector<std::byte>& bytes, std::size_t at, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<std::byte>(value >> (24 - 8 * i));
}

void reseal(std::vector<std::byte>& bytes) { put32(bytes, 36, checksum(bytes, 36)); }

}  // namespace

TEST_CASE("a header qemu-img wrote decodes field by field") {
  auto header = parse_header(qemu_header());
  REQUIRE(header);
  CHECK(header->table_offset == 0x600);
  CHECK(header->version == 0x00010000);
  CHECK(header->max_table_entries == 6);
  CHECK(header->block_size == 2u << 20);
  CHECK(header->checksum == 0xfffff471);
  CHECK(header->parent_name.empty());
  for (const ParentLocatorEntry& l : header->locators) CHECK(l.platform_code == 0);
}

TEST_CASE("a differencing header's parent: uid, timestamp, UTF-16BE name, locators") {
  auto bytes = qemu_header();
  for (std::size_t i = 0; i < 16; ++i) bytes[40 + i] = static_cast<std::byte>(0x10 + i);
  put32(bytes, 56, 0x01020304);
  const std::string name = "b\xc3\xa4se.vhd";  // "bäse.vhd"
  auto utf16 = wire("0062 00e4 0073 0065 002e 0076 0068 0064");
  std::copy(utf16.begin(), utf16.end(), bytes.begin() + 64);
  // Locator 1: MacX, 1 sector, 21 bytes at offset 0x0000000100000800.
  auto locator = wire("4d616358 00000001 00000015 00000000 0000000100000800");
  std::copy(locator.begin(), locator.end(), bytes.begin() + 576 + 24);
  reseal(bytes);
  auto header = parse_header(bytes);
  REQUIRE(header);
  CHECK(to_string(header->parent_uid) == "10111213-1415-1617-1819-1a1b1c1d1e1f");
  CHECK(header->parent_timestamp == 0x01020304);
  CHECK(header->parent_name == name);
  CHECK(header->locators[0].platform_code == 0);
  CHECK(header->locators[1].platform_code == 0x4d616358);
  CHECK(header->locators[1].data_space == 1);
  CHECK(header->locators[1].data_length == 21);
  CHECK(header->locators[1].data_offset == 0x100000800ull);
}

TEST_CASE("bad headers are refused with the reason") {
  auto bytes = qemu_header();
  bytes[3] = std::byte{'X'};
  CHECK(parse_header(bytes).error().message == "the cookie is not 'cxsparse'");
  bytes = qemu_header();
  bytes[1000] = std::byte{2};
  CHECK(parse_header(bytes).error().message == "the checksum is 0xfffff471 but the bytes sum to 0xfffff46f");
  bytes = qemu_header();
  put32(bytes, 32, 3u << 20);
  reseal(bytes);
  CHECK(parse_header(bytes).error().message == "the block size 3145728 is not a power of two");
  put32(bytes, 32, 0);
  reseal(bytes);
  CHECK(parse_header(bytes).error().message == "the block size 0 is not a power of two");
  put32(bytes, 32, 256);
  reseal(bytes);
  CHECK(parse_header(bytes).error().message == "the block size 256 is outside 512 bytes to 1 GiB");
  put32(bytes, 32, 1u << 31);
  reseal(bytes);
  CHECK(parse_header(bytes).error().message == "the block size 2147483648 is outside 512 bytes to 1 GiB");
  put32(bytes, 32, 512);
  reseal(bytes);
  CHECK(parse_header(bytes)->block_size == 512);
  put32(bytes, 24, 0x00020000);
  reseal(bytes);
  CHECK(parse_header(bytes).error().message == "header version 0x00020000 is not 1.x");
  bytes.resize(512);
  CHECK(parse_header(bytes).error().message == "a dynamic header is 1024 bytes, not 512");
}
