// The embedding API: one transfer from a source URI to a destination URI.
//
//   sluice::Transfer t("disk.img", "nbd://host/export", endpoint_options, copy_options);
//   auto stats = co_await t.run();        // coroutine form, on the caller's io_context
//   t.cancel();                           // from the same thread, stops it
//
//   auto stats = sluice::transfer_blocking("disk.img", "copy.img");   // blocking form
//
// A Transfer owns no global state: a program may run any number at once. An NBD
// endpoint may run its further connections on threads of its own
// (EndpointOptions::threads), which post their completions to the caller's io_context:
// that context must not be created with one of Asio's UNSAFE concurrency hints.
#pragma once

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

  // Opens both ends, copies, flushes and closes. Call once.
  awaitable<Result<TransferStats>> run();

  // Stops a running transfer; run() then fails with "the transfer was cancelled".
  void cancel() { cancellation_.request(); }

  // Completed bytes so far (never issued ones) and the total.
  ProgressUpdate progress() const { return progress_; }

 private:
  std::string source_;
  std::string destination_;
  EndpointOptions endpoints_;
  CopyOptions copy_;
  Cancellation cancellation_;
  ProgressUpdate progress_;
};

// Runs one transfer on a private event loop on the calling thread.
Result<TransferStats> transfer_blocking(std::string_view source, std::string_view destination,
                                        const EndpointOptions& endpoints = {},
                                        const CopyOptions& copy = {});

}  // namespace sluice
