#include "engine/net/stream.hpp"

#include <string>
#include <vector>

#include "engine/net/deadline.hpp"

namespace sluice {

awaitable<Status> Stream::send(Frame frame) {
  Completion done(co_await asio::this_coro::executor);
  queue_.push_back(Pending{frame, &done});
  if (!writing_) co_await write_queued();
  co_return co_await done.wait();
}

awaitable<void> Stream::write_queued() {
  writing_ = true;
  std::vector<Pending> batch;
  while (!queue_.empty()) {
    batch.clear();
    std::size_t bytes = 0;
    while (!queue_.empty() && batch.size() < batch_frames() &&
           (batch.empty() || bytes + queue_.front().frame.size() <= batch_bytes())) {
      bytes += queue_.front().frame.size();
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    // MSG_MORE alone would not hold a partial segment between batches (tcp_cork.hpp).
    const bool more = !queue_.empty();
    TcpCork* held = cork();
    if (held != nullptr && more) held->hold();
    Status status = co_await transmit_bounded(batch, more);
    if (held != nullptr && !more) held->release();
    for (Pending& p : batch) p.done->complete(status);
    if (!status) {
      fail_pending(status.error());
      break;
    }
  }
  writing_ = false;
}

awaitable<Status> Stream::transmit_bounded(std::span<const Pending> batch, bool more) {
  const std::chrono::seconds limit = stall_timeout();
  if (limit.count() <= 0) co_return co_await transmit(batch, more);
  // One batch is at most batch_bytes() (1 MiB): a peer that takes none of it within
  // the limit has stopped reading, it is not merely slow.
  Deadline deadline(co_await asio::this_coro::executor, limit, -1, this);
  Status status = co_await transmit(batch, more);
  deadline.disarm();
  if (!status && deadline.fired())
    co_return fail(std::errc::timed_out, "sending to " + peer() + " stalled for " + std::to_string(limit.count()) +
                                             " seconds: the peer stopped reading");
  co_return status;
}

void Stream::fail_pending(const Error& error) {
  while (!queue_.empty()) {
    queue_.front().done->complete(tl::unexpected(error));
    queue_.pop_front();
  }
}

}  // namespace sluice
