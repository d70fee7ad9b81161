// Credits: a counting semaphore for coroutines on one thread. A stage that needs a
// credit waits for one; nobody spins and nothing locks. Built on a bounded channel of
// tokens, as in Asio's throttling_proxy example: capacity = credits, acquire = receive,
// release = send.
#pragma once

#include <cstddef>

#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class Credits {
 public:
  Credits(executor ex, std::size_t count);

  // Waits for a credit. Fails with a cancellation once close() has been called.
  awaitable<Status> acquire();
  void release();

  // Wakes every waiter with a cancellation; later acquires fail at once.
  void close();

  std::size_t total() const { return total_; }
  std::size_t in_use() const { return in_use_; }
  std::size_t high_water() const { return high_water_; }

 private:
  // Asio 1.22 cannot instantiate a channel of void(error_code) alone (its traits are
  // ambiguous), hence the unused bool.
  asio::experimental::channel<void(asio::error_code, bool)> tokens_;
  std::size_t total_;
  std::size_t in_use_ = 0;
  std::size_t high_water_ = 0;
};

// Gives a credit back when it goes out of scope (every return path of a coroutine).
struct CreditHeld {
  explicit CreditHeld(Credits& held) : credits(held) {}
  CreditHeld(const CreditHeld&) = delete;
  CreditHeld& operator=(const CreditHeld&) = delete;
  ~CreditHeld() { credits.release(); }
  Credits& credits;
};

}  // namespace sluice
