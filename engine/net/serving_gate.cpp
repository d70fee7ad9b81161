#include "engine/net/serving_gate.hpp"

namespace sluice {

// Out of line: g++ 12 inlines a small coroutine's ramp into its caller's and then
// mistakes Asio's frame allocation for a mismatched new and delete.
awaitable<Status> ServingGate::enter() {
  if (entered_ || !claim_) {
    entered_ = true;
    co_return Status{};
  }
  Status claimed = co_await claim_();
  entered_ = bool(claimed);
  co_return claimed;
}

}  // namespace sluice
