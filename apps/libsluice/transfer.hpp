// The embedding API: one transfer from a source URI to a destination URI.
//
//   sluice::Transfer t("disk.img", "nbd://host/export", endpoint_options, copy_options);
//   auto stats = co_await t.run();        // coroutine form, on the caller's io_context
//   t.cancel();                           // from any thread, stops it
//
//   auto stats = sluice::transfer_blocking("disk.img", "copy.img");   // blocking form
//
// Cancelling stops the transfer wherever it is: connecting, in a handshake, copying,
// flushing. A blocking transfer is cancelled through CopyOptions::cancellation, whose
// request() may come from any thread. Errors, and exceptions from inside (an event
// loop that cannot be set up), come back as an Error naming the cause; run() never
// throws. A Transfer must outlive its run(). It runs once: a second run() fails at
// once and touches neither end.
//
// A Transfer owns no global state: a program may run any number at once. An NBD
// endpoint may run its further connections on threads of its own
// (EndpointOptions::threads), which post their completions to the caller's io_context:
// that context must not be created with one of Asio's UNSAFE concurrency hints.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "apps/libsluice/endpoint_options.hpp"
#include "engine/asio.hpp"
#include "engine/cancellation.hpp"
#include "engine/copy_options.hpp"
#include "engine/error.hpp"
#include "engine/stats.hpp"

namespace sluice {

class Transfer {
 public:
  Transfer(std::string source, std::string destination, EndpointOptions endpoints = {},
           CopyOptions copy = {});

  // Opens both ends, copies, flushes and closes. A second call fails without running.
  awaitable<Result<TransferStats>> run();

  // Stops the transfer (before or while it runs); run() then fails with "the transfer
  // was cancelled". Thread-safe.
  void cancel() { cancellation_.request(); }

  // Completed bytes so far (never issued ones) and the total, as of the last progress
  // call (CopyOptions::progress says how often). Thread-safe.
  ProgressUpdate progress() const;

 private:
  awaitable<Result<TransferStats>> run_endpoints();

  std::string source_;
  std::string destination_;
  EndpointOptions endpoints_;
  CopyOptions copy_;
  Cancellation cancellation_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<double> seconds_{0};
  std::atomic<bool> started_{false};
};

// Runs `transfer` on a private event loop on the calling thread; its progress() and
// cancel() work from other threads meanwhile.
Result<TransferStats> run_blocking(Transfer& transfer);

// Runs one transfer on a private event loop on the calling thread. To stop it from
// another thread, set `copy.cancellation` and request() it.
Result<TransferStats> transfer_blocking(std::string_view source, std::string_view destination,
                                        const EndpointOptions& endpoints = {},
                                        const CopyOptions& copy = {});

}  // namespace sluice
