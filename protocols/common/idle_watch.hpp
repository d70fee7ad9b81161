// Drops a one-way sender that stops sending. The protocols have no keepalive and no
// replies, so a connected sender that sends nothing would hold the receiver (and its
// one slot for an output file) for as long as it stays connected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include <asio/steady_timer.hpp>

#include "engine/asio.hpp"
#include "protocols/common/stream_reader.hpp"

namespace sluice {

class IdleWatch {
 public:
  // When no byte has arrived through the reader for `limit` (timed from the last
  // arrival), the stream's reads are stopped (they see its end, which the receiver then
  // reports as a truncated transfer) and expired() says why. A zero limit watches
  // nothing.
  IdleWatch(executor ex, StreamReader& reader, std::chrono::seconds limit);
  ~IdleWatch();
  IdleWatch(const IdleWatch&) = delete;
  IdleWatch& operator=(const IdleWatch&) = delete;

  bool expired() const { return expired_; }

 private:
  void arm();
  // Bytes that have arrived through the reader so far.
  std::uint64_t received() const;

  asio::steady_timer timer_;
  StreamReader& reader_;
  std::chrono::seconds limit_;
  std::uint64_t seen_ = 0;
  bool expired_ = false;
  // Pending waits outlive a cancel: they check this, not `this`.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sluice
