#include "engine/loop_threads.hpp"

#include <pthread.h>

#include <cstdio>
#include <exception>
#include <string>

namespace sluice {

LoopThreads::LoopThreads(std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    // Concurrency hint 1: each loop is run by exactly one thread. Asio keeps its
    // locking at this hint, which run_on and the posts between loops rely on: never
    // one of the UNSAFE hints here.
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    keep_running_.push_back(asio::make_work_guard(*contexts_.back()));
  }
}

LoopThreads::~LoopThreads() { stop(); }

void LoopThreads::start() {
  for (auto& context : contexts_) {
    const std::string name = "sluice-loop" + std::to_string(threads_.size() + 1);
    threads_.emplace_back([&context = *context, name] {
      // Named so that top -H, perf and the tests can tell the loops apart.
      pthread_setname_np(pthread_self(), name.c_str());
      try {
        context.run();
      } catch (const std::exception& e) {
        // Handlers report their errors as values; an exception here is a bug, and
        // the process cannot go on with a loop that stopped half way.
        std::fprintf(stderr, "sluice: internal error in an event loop: %s\n", e.what());
        std::terminate();
      }
    });
  }
}

void LoopThreads::stop() {
  for (auto& guard : keep_running_) guard.reset();
  for (auto& thread : threads_)
    if (thread.joinable()) thread.join();
  threads_.clear();
}

}  // namespace sluice
