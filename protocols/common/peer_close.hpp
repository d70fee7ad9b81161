// The end of a one-way stream (Chunked, raw): after its last byte, the sender waits
// for the receiver to close first. Closing a socket that still holds unread bytes
// (TLS 1.3 session tickets nobody reads in a one-way protocol) makes the kernel send
// a reset instead of a FIN, and a reset can destroy the receiver's unread data, the
// terminator included. Waiting also means the sender returns only once the receiver
// is done (a Sluice or vhd-tool receiver closes after flushing).
#pragma once

#include <chrono>

#include "engine/asio.hpp"
#include "engine/net/stream.hpp"

namespace sluice {

constexpr std::chrono::seconds default_peer_close_wait{30};

// Reads and discards until the peer closes, fails, or `limit` passes. Fails only when
// the peer refused the transfer, the two refusals a one-way sender can still see after
// its last byte left: a reset (a receiver resets when it gives up with bytes still
// unread, a refused chunk) and a TLS alert (a TLS 1.3 server refusing the client's
// certificate after the client's handshake was done). A clean close, a close without
// close_notify, a timeout or any other error is not one.
awaitable<Status> wait_for_peer_close(Stream& stream, std::chrono::milliseconds limit);

struct OneWayEnd {
  StreamStats stats;  // the stream's final statistics
  Status status;      // the transfer's: the send's failure, else the receiver's reset
};

// Ends a one-way stream after its last send, whose outcome is `sent`: on success waits
// for the peer to close, then closes (every byte was delivered; a close_notify the
// departed peer refuses changes nothing); after a failed send, or when the receiver
// reset the connection, aborts, so the receiver sees the stream cut short.
awaitable<OneWayEnd> end_one_way_stream(Stream& stream, Status sent);

}  // namespace sluice
