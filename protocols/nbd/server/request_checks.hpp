// Whether an NBD request may be served, as a pure function: the spec's errors for
// unknown commands and flags, flags on commands they do not apply to, writes to a
// read-only export, misaligned or oversized requests and ranges beyond the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/block_sizes.hpp"
#include "protocols/nbd/protocol.hpp"
#include "protocols/nbd/transmission_messages.hpp"

namespace sluice::nbd {

// What the connection agreed on during the handshake.
struct TransmissionTerms {
  std::uint64_t size = 0;
  std::uint16_t flags = 0;  // the transmission flags sent to the client
  BlockSizes block_sizes{};
  bool structured_replies = false;
  bool allocation_context = false;  // base:allocation selected for this export
};

struct Refusal {
  Errno error = Errno::einval;
  std::string message;
};

// Nothing when the request is fine. DISC is checked like the others (its offset and
// length must be zero) but the caller decides what a bad DISC means.
std::optional<Refusal> check_request(const RequestHeader& request, const TransmissionTerms& terms);

}  // namespace sluice::nbd
