#include "engine/net/stream.hpp"

#include <vector>

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
    Status status = co_await transmit(batch, !queue_.empty());
    for (Pending& p : batch) p.done->complete(status);
    if (!status) {
      fail_pending(status.error());
      break;
    }
  }
  writing_ = false;
}

void Stream::fail_pending(const Error& error) {
  while (!queue_.empty()) {
    queue_.front().done->complete(tl::unexpected(error));
    queue_.pop_front();
  }
}

}  // namespace sluice
