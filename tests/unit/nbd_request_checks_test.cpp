#include <doctest/doctest.h>

#include "protocols/nbd/server/exports.hpp"
#include "protocols/nbd/server/request_checks.hpp"

using namespace sluice;
using namespace sluice::nbd;

namespace {

TransmissionTerms writable(BlockSizes sizes = {}) {
  ImageTraits traits;
  traits.can_trim = true;
  traits.flush_covers_all = true;
  traits.block_sizes = sizes;
  TransmissionTerms terms;
  terms.size = 1 << 20;
  terms.flags = transmission_flags(traits, true);
  terms.block_sizes = sizes;
  terms.structured_replies = true;
  terms.allocation_context = true;
  return terms;
}

Errno verdict(const RequestHeader& request, const TransmissionTerms& terms) {
  auto refusal = check_request(request, terms);
  return refusal ? refusal->error : Errno::none;
}

RequestHeader req(Command command, std::uint64_t offset, std::uint32_t length, std::uint16_t flags = 0) {
  return RequestHeader{flags, command, 1, offset, length};
}

}  // namespace

TEST_CASE("transmission flags advertise what the image can do") {
  ImageTraits traits;
  traits.flush_covers_all = true;
  traits.can_trim = true;
  using namespace transmission_flag;
  std::uint16_t flags = transmission_flags(traits, true);
  CHECK(flags == (has_flags | send_flush | send_fua | send_cache | send_write_zeroes | send_fast_zero | send_trim |
                  send_df | can_multi_conn));
  // DF needs structured replies; multi-conn needs a flush that covers every handle.
  traits.flush_covers_all = false;
  CHECK((transmission_flags(traits, false) & (send_df | can_multi_conn)) == 0);
  traits.read_only = true;
  flags = transmission_flags(traits, true);
  CHECK((flags & read_only) != 0);
  CHECK((flags & (send_write_zeroes | send_fast_zero | send_trim)) == 0);
}

TEST_CASE("requests within the export and the rules are served") {
  auto terms = writable();
  CHECK(verdict(req(Command::read, 0, 4096), terms) == Errno::none);
  CHECK(verdict(req(Command::write, (1 << 20) - 512, 512, command_flag::fua), terms) == Errno::none);
  CHECK(verdict(req(Command::write_zeroes, 0, 1 << 20, command_flag::no_hole | command_flag::fast_zero), terms) ==
        Errno::none);
  CHECK(verdict(req(Command::block_status, 0, 1 << 20, command_flag::req_one), terms) == Errno::none);
  CHECK(verdict(req(Command::read, 0, 65536, command_flag::df), terms) == Errno::none);
  CHECK(verdict(req(Command::flush, 0, 0), terms) == Errno::none);
}

TEST_CASE("ranges beyond the end: ENOSPC for writes, EINVAL for the rest") {
  auto terms = writable();
  CHECK(verdict(req(Command::write, (1 << 20) - 511, 512), terms) == Errno::enospc);
  CHECK(verdict(req(Command::write_zeroes, 1 << 20, 1), terms) == Errno::enospc);
  CHECK(verdict(req(Command::read, (1 << 20) - 1, 2), terms) == Errno::einval);
  CHECK(verdict(req(Command::trim, 1 << 20, 4096), terms) == Errno::einval);
  CHECK(verdict(req(Command::block_status, 2 << 20, 1), terms) == Errno::einval);
  // offset + length would wrap around 2^64: still beyond the end, not within it.
  CHECK(verdict(req(Command::read, ~std::uint64_t{0} - 10, 512), terms) == Errno::einval);
}

TEST_CASE("oversized, misaligned, unknown and misapplied requests get EINVAL") {
  auto terms = writable();
  terms.size = std::uint64_t{1} << 40;
  CHECK(verdict(req(Command::read, 0, (32u << 20) + 1), terms) == Errno::einval);
  CHECK(verdict(req(Command::write, 0, (32u << 20) + 1), terms) == Errno::einval);
  CHECK(verdict(req(Command::cache, 0, (32u << 20) + 1), terms) == Errno::einval);
  // No payload moves: zeroing and trimming may be large.
  CHECK(verdict(req(Command::write_zeroes, 0, 1u << 31), terms) == Errno::none);
  CHECK(verdict(req(Command::trim, 0, 1u << 31), terms) == Errno::none);

  auto aligned = writable(BlockSizes{4096, 4096, 32u << 20});
  CHECK(verdict(req(Command::read, 512, 4096), aligned) == Errno::einval);
  CHECK(verdict(req(Command::write, 0, 1000), aligned) == Errno::einval);
  CHECK(verdict(req(Command::read, 4096, 8192), aligned) == Errno::none);

  CHECK(verdict(req(static_cast<Command>(42), 0, 512), terms) == Errno::einval);
  CHECK(verdict(req(Command::resize, 0, 512), terms) == Errno::einval);
  CHECK(verdict(req(Command::read, 0, 512, 1u << 7), terms) == Errno::einval);
  CHECK(verdict(req(Command::read, 0, 512, command_flag::no_hole), terms) == Errno::einval);
  CHECK(verdict(req(Command::write, 0, 512, command_flag::req_one), terms) == Errno::einval);
  CHECK(verdict(req(Command::trim, 0, 512, command_flag::fast_zero), terms) == Errno::einval);
  CHECK(verdict(req(Command::write, 0, 512, command_flag::df), terms) == Errno::einval);
  CHECK(verdict(req(Command::flush, 512, 0), terms) == Errno::einval);
  CHECK(verdict(req(Command::block_status, 0, 0), terms) == Errno::einval);

  // DF and BLOCK_STATUS need what the handshake did not give.
  auto plain = writable();
  plain.structured_replies = false;
  plain.flags &= static_cast<std::uint16_t>(~transmission_flag::send_df);
  CHECK(verdict(req(Command::read, 0, 512, command_flag::df), plain) == Errno::einval);
  CHECK(verdict(req(Command::block_status, 0, 512), plain) == Errno::einval);
  auto no_context = writable();
  no_context.allocation_context = false;
  CHECK(verdict(req(Command::block_status, 0, 512), no_context) == Errno::einval);
}

TEST_CASE("a read-only export refuses every kind of write with EPERM") {
  ImageTraits traits;
  traits.read_only = true;
  TransmissionTerms terms;
  terms.size = 1 << 20;
  terms.flags = transmission_flags(traits, true);
  terms.structured_replies = true;
  CHECK(verdict(req(Command::write, 0, 512), terms) == Errno::eperm);
  CHECK(verdict(req(Command::write_zeroes, 0, 512), terms) == Errno::eperm);
  CHECK(verdict(req(Command::trim, 0, 512), terms) == Errno::eperm);
  CHECK(verdict(req(Command::read, 0, 512), terms) == Errno::none);
  CHECK(verdict(req(Command::flush, 0, 0), terms) == Errno::none);
}
