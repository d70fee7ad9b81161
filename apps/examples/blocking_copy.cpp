// Embedding Sluice without an event loop of one's own: the blocking form on the calling
// thread, progress printed as it comes, and a cancellation from another thread (here a
// watchdog; in a toolstack, the thread that serves its RPCs).
//
//   blocking_copy SOURCE DESTINATION [SECONDS]
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "apps/libsluice/sluice.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOURCE DESTINATION [SECONDS]\n", argv[0]);
    return 2;
  }
  const auto limit = std::chrono::seconds(argc > 3 ? std::atoi(argv[3]) : 3600);

  sluice::Cancellation cancellation;
  sluice::CopyOptions copy;
  copy.cancellation = &cancellation;
  copy.progress = [](const sluice::ProgressUpdate& u) {
    std::fprintf(stderr, "\r%3.0f%%", u.total ? 100.0 * static_cast<double>(u.done) / static_cast<double>(u.total) : 100.0);
  };

  // The watchdog gives up at the limit, unless the copy finishes first.
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!finished_cv.wait_for(lock, limit, [&] { return finished; })) cancellation.request();
  });

  auto result = sluice::transfer_blocking(argv[1], argv[2], sluice::EndpointOptions{}, copy);
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  finished_cv.notify_one();
  watchdog.join();

  if (!result) {
    std::fprintf(stderr, "\ncopy failed: %s\n", result.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "\ncopied %llu bytes in %.3f s\n", static_cast<unsigned long long>(result->size),
               result->seconds);
  return 0;
}
