#include "storage/vhd/vhd_footer.hpp"

#include <doctest/doctest.h>

#include "storage/vhd/vhd_bytes.hpp"
#include "wire_bytes.hpp"

using namespace sluice::vhd;
using sluice::test::wire;

namespace {

// The footer `qemu-img create -f vpc x.vhd 10M` wrote (qemu 7.2), zeros after the uid.
std::vector<std::byte> qemu_footer() {
  auto bytes = wire(
      "636f6e6563746978 00000002 00010000 0000000000000200 32a9b517 71656d75 00050003 5769326b"
      "0000000000a07000 0000000000a07000 012e0411 00000003 ffffedc0"
      "88c0627abb7f48d48603b936ff266734 00");
  bytes.resize(footer_size);
  return bytes;
}

void reseal(std::vector<std::byte>& bytes) {
  const std::uint32_t sum = checksum(bytes, 64);
  for (int i = 0; i < 4; ++i) bytes[64 + static_cast<std::size_t>(i)] = static_cast<std::byte>(sum >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("a footer qemu-img wrote decodes field by field") {
  auto footer = parse_footer(qemu_footer());
  REQUIRE(footer);
  CHECK(footer->features == 2);
  CHECK(footer->version == 0x00010000);
  CHECK(footer->data_offset == 512);
  CHECK(footer->timestamp == 0x32a9b517);
  CHECK(footer->creator == "qemu");
  CHECK(footer->creator_version == 0x00050003);
  CHECK(footer->creator_host_os == 0x5769326b);
  CHECK(footer->original_size == 0xa07000);
  CHECK(footer->current_size == 0xa07000);
  CHECK(footer->cylinders == 302);
  CHECK(footer->heads == 4);
  CHECK(footer->sectors_per_track == 17);
  CHECK(footer->disk_type == DiskType::dynamic);
  CHECK(footer->checksum == 0xffffedc0);
  CHECK(to_string(footer->uid) == "88c0627a-bb7f-48d4-8603-b936ff266734");
  CHECK_FALSE(footer->saved_state);
}

TEST_CASE("the footer cookie") {
  auto bytes = qemu_footer();
  CHECK(has_footer_cookie(bytes));
  bytes[7] = std::byte{'y'};
  CHECK_FALSE(has_footer_cookie(bytes));
  auto footer = parse_footer(bytes);
  REQUIRE_FALSE(footer);
  CHECK(footer.error().message == "the cookie is 'conectiy', not 'conectix'");
  bytes[0] = std::byte{0};
  CHECK(parse_footer(bytes).error().message == "the cookie is '\\x00onectiy', not 'conectix'");
  CHECK_FALSE(has_footer_cookie(std::span(bytes).first(4)));
}

TEST_CASE("a footer whose checksum does not match is refused") {
  auto bytes = qemu_footer();
  bytes[200] = std::byte{1};
  auto footer = parse_footer(bytes);
  REQUIRE_FALSE(footer);
  CHECK(footer.error().message == "the checksum is 0xffffedc0 but the bytes sum to 0xffffedbf");
}

TEST_CASE("a footer's version and disk type are checked") {
  auto bytes = qemu_footer();
  bytes[13] = std::byte{2};  // version 0x00020000
  reseal(bytes);
  CHECK(parse_footer(bytes).error().message == "format version 0x00020000 is not 1.x");
  bytes = qemu_footer();
  bytes[63] = std::byte{5};
  reseal(bytes);
  CHECK(parse_footer(bytes).error().message ==
        "disk type 5 is not fixed (2), dynamic (3) or differencing (4)");
  bytes[63] = std::byte{4};
  reseal(bytes);
  CHECK(parse_footer(bytes)->disk_type == DiskType::differencing);
  bytes[63] = std::byte{2};
  reseal(bytes);
  CHECK(parse_footer(bytes)->disk_type == DiskType::fixed);
}

TEST_CASE("a footer is exactly 512 bytes") {
  auto bytes = qemu_footer();
  bytes.pop_back();
  CHECK(parse_footer(bytes).error().message == "a footer is 512 bytes, not 511");
}
