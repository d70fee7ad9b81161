// The embedding API for the receiving side: what `sluice serve` runs, as an object a
// toolstack holds on the destination host of a migration.
//
//   sluice::ReceiverOptions o;
//   o.listen = "tcp://0.0.0.0:0";  o.output = "/dev/vg/disk";  o.once = true;
//   auto receiver = sluice::Receiver::create(ex, o);  // checks, opens the output
//   (*receiver)->listen();                          // binds; address() names the port
//   Status done = co_await (*receiver)->run();      // one sender (once), or until stop()
//
//   Status done = sluice::receive_blocking(o, [](sluice::Receiver& r) { ... });
//
// Chunked and raw streams are written into one output, by one sender at a time, and
// flushed before the sender counts as received; NBD serves the configured exports to
// any number of clients. stop() stops accepting and lets the connections in progress
// finish (a Chunked or raw transfer can take as long as its image); abort() cuts those
// short. A Receiver lives on the caller's io_context, which accepts; NBD connections
// are spread over further event loops of its own (ReceiverOptions::threads).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/libsluice/receiver_options.hpp"
#include "engine/asio.hpp"
#include "engine/error.hpp"

namespace sluice {

class Receiver {
 public:
  // Checks the options and fills in the defaults they leave open (threads,
  // max_connections, the key file). Errors name the `sluice serve` flags.
  static Status check(ReceiverOptions& options);

  // Checks, then opens what will be served (the output is created and sized, exports
  // opened, writable block devices claimed) without listening yet, so that a bad
  // output is found before any sender is told to come.
  static Result<std::unique_ptr<Receiver>> create(executor ex, ReceiverOptions options);

  ~Receiver();
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Binds the listening socket (a Unix socket file is removed again when the Receiver
  // goes) and starts the further loops. run() calls it when it has not been called.
  Status listen();
  // Where it listens, as a URI a sender can use ("tcp://127.0.0.1:40123" after port 0);
  // empty before listen().
  const std::string& address() const { return address_; }

  // Serves until stop() (or, with `once`, the first connection, whose result it is),
  // then waits for the connections in progress. Fails when abort() cut transfers
  // short. Runs once.
  awaitable<Status> run();

  // Both may be called from any thread, before or during run().
  void stop();
  void abort();

  // Connections being served now (read on the caller's io_context).
  std::size_t active() const;

 private:
  struct State;
  Receiver(executor ex, ReceiverOptions options);
  static void stop_on_loop(State& state);
  static void abort_on_loop(State& state);

  executor ex_;
  std::shared_ptr<State> state_;  // shared with the stop() and abort() on their way
  std::string address_;
  std::atomic<bool> ran_{false};
};

// Runs a Receiver on a private event loop on the calling thread until it is done.
// `listening` is called once it listens (read address() there, or keep the Receiver to
// stop() it from another thread while this call lasts).
Status receive_blocking(ReceiverOptions options, const std::function<void(Receiver&)>& listening = {});

}  // namespace sluice
