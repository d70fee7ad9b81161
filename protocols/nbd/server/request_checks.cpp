#include "protocols/nbd/server/request_checks.hpp"

#include "protocols/nbd/block_size_rules.hpp"

namespace sluice::nbd {

namespace {

Refusal refuse(Errno error, std::string message) { return Refusal{error, std::move(message)}; }

std::string describe(const RequestHeader& r) {
  return "NBD " + to_string(r.command) + " of " + std::to_string(r.length) + " bytes at offset " +
         std::to_string(r.offset);
}

bool writes(Command c) { return c == Command::write || c == Command::write_zeroes || c == Command::trim; }

}  // namespace

std::optional<Refusal> check_request(const RequestHeader& r, const TransmissionTerms& terms) {
  using namespace command_flag;
  switch (r.command) {
    case Command::read:
    case Command::write:
    case Command::disc:
    case Command::flush:
    case Command::trim:
    case Command::cache:
    case Command::write_zeroes:
    case Command::block_status: break;
    default: return refuse(Errno::einval, "unknown NBD command " + to_string(r.command));
  }

  constexpr std::uint16_t known = fua | no_hole | df | req_one | fast_zero;
  if ((r.flags & ~known) != 0)
    return refuse(Errno::einval, describe(r) + ": unknown command flags " + std::to_string(r.flags & ~known));
  auto flag_misused = [&](const char* name) {
    return refuse(Errno::einval, describe(r) + ": the " + name + " flag does not apply");
  };
  if ((r.flags & fua) && !(terms.flags & transmission_flag::send_fua)) return flag_misused("FUA");
  if ((r.flags & no_hole) && r.command != Command::write_zeroes) return flag_misused("NO_HOLE");
  if ((r.flags & fast_zero) &&
      (r.command != Command::write_zeroes || !(terms.flags & transmission_flag::send_fast_zero)))
    return flag_misused("FAST_ZERO");
  if ((r.flags & df) && (r.command != Command::read || !(terms.flags & transmission_flag::send_df)))
    return flag_misused("DF");
  if ((r.flags & req_one) && r.command != Command::block_status) return flag_misused("REQ_ONE");

  if (writes(r.command) && (terms.flags & transmission_flag::read_only))
    return refuse(Errno::eperm, describe(r) + ": the export is read-only");
  if (r.command == Command::trim && !(terms.flags & transmission_flag::send_trim))
    return refuse(Errno::einval, describe(r) + ": TRIM is not supported by this export");
  if (r.command == Command::write_zeroes && !(terms.flags & transmission_flag::send_write_zeroes))
    return refuse(Errno::einval, describe(r) + ": WRITE_ZEROES is not supported by this export");
  if (r.command == Command::block_status && !(terms.structured_replies && terms.allocation_context))
    return refuse(Errno::einval, describe(r) + ": no metadata context was negotiated");

  if (r.command == Command::flush || r.command == Command::disc) {
    if (r.offset != 0 || r.length != 0)
      return refuse(Errno::einval, describe(r) + ": offset and length must be zero");
    return std::nullopt;
  }

  if (Status fits = nbd::check_request(r.command, r.offset, r.length, terms.block_sizes); !fits)
    return refuse(Errno::einval, fits.error().message);
  if (r.command == Command::cache && r.length > terms.block_sizes.maximum)
    return refuse(Errno::einval, describe(r) + ": exceeds the maximum of " +
                                     std::to_string(terms.block_sizes.maximum) + " bytes");
  if (r.command == Command::block_status && r.length == 0)
    return refuse(Errno::einval, describe(r) + ": the length must not be zero");

  const bool beyond = r.offset > terms.size || r.length > terms.size - r.offset;
  if (beyond) {
    // Writes past the end read as "no space"; everything else as a bad argument.
    const bool space = r.command == Command::write || r.command == Command::write_zeroes;
    return refuse(space ? Errno::enospc : Errno::einval,
                  describe(r) + ": beyond the end of the export (" + std::to_string(terms.size) + " bytes)");
  }
  return std::nullopt;
}

}  // namespace sluice::nbd
