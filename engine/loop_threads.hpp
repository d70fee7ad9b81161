// LoopThreads: event loops beyond the caller's own, one io_context (and so one
// io_uring) per thread, for a service that spreads its connections over cores.
//
// Work is handed to a loop by spawning onto its executor; objects bound to a loop
// (sockets, timers, rings) must only be used from it. Each loop runs until stop(),
// then returns once its work is done; stop() joins the threads. Objects bound to these
// loops must be destroyed before the LoopThreads that own them.
#pragma once

#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "engine/asio.hpp"

namespace sluice {

class LoopThreads {
 public:
  // Creates `count` loops; none runs until start().
  explicit LoopThreads(std::size_t count);
  ~LoopThreads();
  LoopThreads(const LoopThreads&) = delete;
  LoopThreads& operator=(const LoopThreads&) = delete;

  std::size_t size() const { return contexts_.size(); }
  executor at(std::size_t index) const { return contexts_[index]->get_executor(); }

  void start();
  // Lets every loop finish what it has and return; joins the threads.
  void stop();

 private:
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running_;
  std::vector<std::thread> threads_;
};

}  // namespace sluice
