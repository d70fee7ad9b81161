#include <doctest/doctest.h>

#include <ostream>  // doctest prints std::error_code through it
#include <string>

#include "protocols/nbd/block_size_rules.hpp"

using namespace sluice;
using namespace sluice::nbd;

namespace {
bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("block sizes real servers advertise are valid") {
  CHECK(validate_block_sizes({1, 4096, 32u << 20}));         // qemu-nbd
  CHECK(validate_block_sizes({512, 4096, 0xffffffff}));
  CHECK(validate_block_sizes({65536, 65536, 32u << 20}));    // compressed qcow2 target
  CHECK(validate_block_sizes({4096, 4096, 4096}));
  CHECK(validate_block_sizes({1, 512, 512}));
}

TEST_CASE("the minimum is a power of 2 no larger than 64 KiB") {
  auto zero = validate_block_sizes({0, 4096, 32u << 20});
  REQUIRE_FALSE(zero);
  CHECK(zero.error().code == std::errc::invalid_argument);
  CHECK(zero.error().message ==
        "NBD block sizes 0/4096/33554432 (minimum/preferred/maximum): the minimum must be a "
        "power of 2 no larger than 65536");
  CHECK_FALSE(validate_block_sizes({3000, 4096, 32u << 20}));
  CHECK_FALSE(validate_block_sizes({131072, 131072, 32u << 20}));
}

TEST_CASE("the preferred size is a power of 2 of at least max(minimum, 512)") {
  auto small = validate_block_sizes({1, 256, 32u << 20});
  REQUIRE_FALSE(small);
  CHECK(contains(small.error().message, "at least 512"));
  auto below_min = validate_block_sizes({65536, 4096, 32u << 20});
  REQUIRE_FALSE(below_min);
  CHECK(contains(below_min.error().message, "at least 65536"));
  CHECK_FALSE(validate_block_sizes({512, 6144, 32u << 20}));
}

TEST_CASE("the maximum is 0xffffffff or a multiple of the minimum at least the preferred size") {
  auto below = validate_block_sizes({512, 65536, 4096});
  REQUIRE_FALSE(below);
  CHECK(contains(below.error().message, "smaller than the preferred size"));
  auto ragged = validate_block_sizes({4096, 4096, 10000});
  REQUIRE_FALSE(ragged);
  CHECK(contains(ragged.error().message, "not a multiple of the minimum"));
  CHECK(validate_block_sizes({4096, 4096, 0xffffffff}));
}

TEST_CASE("requests must be aligned to the minimum") {
  const BlockSizes sizes{4096, 65536, 1u << 20};
  CHECK(check_request(Command::read, 8192, 4096, sizes));
  CHECK(check_request(Command::write, 0, 1u << 20, sizes));
  auto offset = check_request(Command::read, 512, 4096, sizes);
  REQUIRE_FALSE(offset);
  CHECK(offset.error().code == std::errc::invalid_argument);
  CHECK(offset.error().message ==
        "NBD READ of 4096 bytes at offset 512 is not aligned to the minimum block size 4096");
  CHECK_FALSE(check_request(Command::write, 4096, 100, sizes));
  CHECK_FALSE(check_request(Command::trim, 4096, 100, sizes));
  CHECK_FALSE(check_request(Command::write_zeroes, 100, 4096, sizes));
  CHECK_FALSE(check_request(Command::block_status, 100, 4096, sizes));
}

TEST_CASE("only READ and WRITE payloads are bounded by the maximum") {
  const BlockSizes sizes{512, 4096, 1u << 20};
  auto big_write = check_request(Command::write, 0, (1u << 20) + 512, sizes);
  REQUIRE_FALSE(big_write);
  CHECK(big_write.error().message ==
        "NBD WRITE of 1049088 bytes at offset 0 exceeds the maximum payload of 1048576 bytes");
  CHECK_FALSE(check_request(Command::read, 0, 2u << 20, sizes));
  CHECK(check_request(Command::trim, 0, 0xfffffe00, sizes));
  CHECK(check_request(Command::write_zeroes, 0, 0xfffffe00, sizes));
  CHECK(check_request(Command::block_status, 0, 0xfffffe00, sizes));
}

TEST_CASE("commands without a range are not judged by block sizes") {
  const BlockSizes sizes{4096, 4096, 4096};
  CHECK(check_request(Command::flush, 0, 0, sizes));
  CHECK(check_request(Command::disc, 0, 0, sizes));
}

TEST_CASE("the defaults accept any byte-granular request up to 32 MiB") {
  const BlockSizes defaults{};
  CHECK(check_request(Command::read, 1, 3, defaults));
  CHECK(check_request(Command::write, 7, 32u << 20, defaults));
  CHECK_FALSE(check_request(Command::write, 7, (32u << 20) + 1, defaults));
}
