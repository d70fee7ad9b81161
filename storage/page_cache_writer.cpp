#include "storage/page_cache_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

namespace sluice {

PageCacheWriter::PageCacheWriter(executor ex, FileRing& ring, int fd, std::size_t turns)
    : ring_(ring), fd_(fd), turns_(ex, turns), changed_(ex, std::chrono::steady_clock::time_point::max()) {}

awaitable<Status> PageCacheWriter::write(std::uint64_t offset, std::span<const std::byte> bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    Pending me{offset + written, bytes.subspan(written)};
    queue_.push_back(&me);
    // Whoever finds no leader waiting for a turn becomes it; the rest wait for the
    // chain that carries their write. A leader may carry others' writes and not its
    // own (it queued after a chain was taken): it then leads again.
    while (!me.done) {
      if (leader_waiting_) {
        co_await changed_.async_wait(use_nothrow);
        continue;
      }
      if (Status led = co_await lead(); !led) {
        forget(&me);
        co_return led;
      }
    }
    // -ECANCELED: a write before it in the same chain failed, so it was never made.
    if (me.result == -ECANCELED) continue;
    if (me.result < 0) co_return fail_at("write", me.offset, errno_code(-me.result));
    if (me.result == 0) co_return fail_at("write", me.offset, std::make_error_code(std::errc::io_error));
    written += static_cast<std::size_t>(me.result);  // the rest of a short write goes again
  }
  co_return Status{};
}

awaitable<Status> PageCacheWriter::lead() {
  leader_waiting_ = true;
  Status got = co_await turns_.acquire();
  leader_waiting_ = false;
  // Someone else may now wait for the next turn (or learn that turns are over).
  changed_.cancel();
  if (!got) co_return got;
  CreditHeld turn{turns_};
  const std::size_t n = std::min(queue_.size(), FileRing::max_chain);
  if (n == 0) co_return Status{};
  std::vector<Pending*> chain(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  co_await run_chain(chain);
  changed_.cancel();
  co_return Status{};
}

awaitable<void> PageCacheWriter::run_chain(std::span<Pending*> chain) {
  std::vector<FileRing::ChainedWrite> writes;
  writes.reserve(chain.size());
  for (const Pending* p : chain) writes.push_back({p->offset, p->bytes});
  std::vector<int> results(chain.size(), -ECANCELED);
  co_await ring_.write_chain(fd_, writes, results, true);
  for (std::size_t i = 0; i < chain.size(); ++i) {
    chain[i]->result = results[i];
    chain[i]->done = true;
  }
  ++chains_;
  chained_writes_ += chain.size();
}

void PageCacheWriter::forget(Pending* pending) {
  auto it = std::find(queue_.begin(), queue_.end(), pending);
  if (it != queue_.end()) queue_.erase(it);
}

}  // namespace sluice
