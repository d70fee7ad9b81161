// Embedding Sluice as a migration backend: run a transfer as a coroutine on the
// program's own io_context, watch its progress, cancel it on a deadline.
//
//   embed_copy SOURCE DESTINATION [SECONDS]
#include <cstdio>
#include <cstdlib>

#include <asio/steady_timer.hpp>

#include "apps/libsluice/sluice.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOURCE DESTINATION [SECONDS]\n", argv[0]);
    return 2;
  }
  asio::io_context context(1);

  sluice::CopyOptions copy;
  // depth stays 0: automatic (8 requests, more to a far-away NBD server).
  copy.progress = [](const sluice::ProgressUpdate& u) {
    std::fprintf(stderr, "\r%llu / %llu bytes", static_cast<unsigned long long>(u.done),
                 static_cast<unsigned long long>(u.total));
  };
  sluice::Transfer transfer(argv[1], argv[2], sluice::EndpointOptions{}, copy);

  // A toolstack would cancel on a user request; here, on a deadline.
  asio::steady_timer deadline(context, std::chrono::seconds(argc > 3 ? std::atoi(argv[3]) : 3600));
  deadline.async_wait([&](asio::error_code ec) {
    if (!ec) transfer.cancel();
  });

  int status = 1;
  asio::co_spawn(context, transfer.run(), [&](std::exception_ptr thrown, sluice::Result<sluice::TransferStats> r) {
    deadline.cancel();
    // run() reports failures as errors, but a handler must never read `r` when an
    // exception is passed: `r` is then default-constructed, which reads as a success.
    if (thrown) {
      std::fprintf(stderr, "\ncopy failed: the transfer threw\n");
      return;
    }
    if (!r) {
      std::fprintf(stderr, "\ncopy failed: %s\n", r.error().message.c_str());
      return;
    }
    std::fprintf(stderr, "\ncopied %llu bytes (%llu written, %llu skipped) in %.3f s\n",
                 static_cast<unsigned long long>(r->size), static_cast<unsigned long long>(r->bytes_written),
                 static_cast<unsigned long long>(r->bytes_skipped), r->seconds);
    status = 0;
  });
  context.run();
  return status;
}
