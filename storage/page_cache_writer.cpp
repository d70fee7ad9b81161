#include "storage/page_cache_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <vector>

namespace sluice {

PageCacheWriter::PageCacheWriter(executor ex, FileRing& ring, int fd, std::size_t turns)
    : ring_(ring), fd_(fd), turns_(ex, turns) {}

awaitable<Status> PageCacheWriter::write(std::uint64_t offset, std::span<const std::byte> bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    Pending me;
    me.offset = offset + written;
    me.bytes = bytes.subspan(written);
    queue_.push_back(&me);
    // Whoever finds no leader waiting for a turn becomes it; the others sleep until
    // their write's chain has ended, or until they are the next to lead. A leader may
    // carry others' writes and not its own (it queued behind a full chain): it then
    // waits like the rest.
    while (!me.done) {
      if (!leader_waiting_ && !me.taken) {
        if (Status led = co_await lead(); !led) {
          forget(&me);
          wake_next_leader();  // which finds out the same way
          co_return led;
        }
        continue;
      }
      co_await sleep(me.sleeper);
    }
    if (me.not_made) continue;
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
  if (!got) co_return got;
  CreditHeld turn{turns_};
  const std::size_t n = std::min(queue_.size(), FileRing::max_chain);
  if (n == 0) co_return Status{};
  std::vector<Pending*> chain(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  for (Pending* p : chain) p->taken = true;
  // Writes queued behind this chain wait for the next turn under a leader of their own.
  wake_next_leader();
  co_await run_chain(chain);
  co_return Status{};
}

awaitable<void> PageCacheWriter::run_chain(std::span<Pending*> chain) {
  std::vector<FileRing::ChainedWrite> writes;
  writes.reserve(chain.size());
  for (const Pending* p : chain) writes.push_back({p->offset, p->bytes});
  std::vector<int> results(chain.size());
  co_await ring_.write_chain(fd_, writes, results, true);
  ++chains_;
  chained_writes_ += chain.size();
  for (std::size_t i = 0; i < chain.size(); ++i) {
    chain[i]->result = results[i];
    // A write after the first that reads -ECANCELED was never made: one before it
    // failed or came up short. The first's own -ECANCELED is a real failure, reported
    // like any other; retrying it could go on for ever.
    chain[i]->not_made = i > 0 && results[i] == -ECANCELED;
    chain[i]->done = true;
    wake(chain[i]->sleeper);
  }
}

void PageCacheWriter::wake_next_leader() {
  if (!queue_.empty()) wake(queue_.front()->sleeper);
}

awaitable<void> PageCacheWriter::sleep(std::unique_ptr<ParkedHandler>& slot) {
  return asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&slot](auto handler) { slot = ParkedHandler::park(std::move(handler)); },
      asio::use_awaitable);
}

void PageCacheWriter::wake(std::unique_ptr<ParkedHandler>& slot) {
  if (!slot) return;
  std::unique_ptr<ParkedHandler> sleeper = std::move(slot);  // slot is empty before anything resumes
  sleeper->post();
}

void PageCacheWriter::forget(Pending* pending) {
  auto it = std::find(queue_.begin(), queue_.end(), pending);
  if (it != queue_.end()) queue_.erase(it);
}

}  // namespace sluice
