#include "engine/uring/pipe_pool.hpp"

namespace sluice {

PipePool::PipePool(executor ex, std::size_t count) : credits_(ex, count), pipes_(count) {
  for (std::size_t i = count; i > 0; --i) free_.push_back(i - 1);
}

awaitable<Result<Pipe*>> PipePool::acquire() {
  if (Status s = co_await credits_.acquire(); !s) co_return tl::unexpected(s.error());
  const std::size_t index = free_.back();
  free_.pop_back();
  if (!pipes_[index]) {
    auto pipe = Pipe::create();
    if (!pipe) {
      free_.push_back(index);
      credits_.release();
      co_return tl::unexpected(pipe.error());
    }
    pipes_[index] = std::make_unique<Pipe>(std::move(*pipe));
  }
  co_return pipes_[index].get();
}

void PipePool::release(Pipe* pipe, bool emptied) {
  for (std::size_t i = 0; i < pipes_.size(); ++i) {
    if (pipes_[i].get() != pipe) continue;
    if (!emptied) pipes_[i].reset();
    free_.push_back(i);
    credits_.release();
    return;
  }
}

}  // namespace sluice
