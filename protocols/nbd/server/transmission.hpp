// The transmission phase of one NBD connection.
//
// One reader coroutine takes requests off the stream (RequestReader): each request's
// WRITE payload lands in a buffer of its own (on a plain socket, into a pipe of its own
// that the image splices into its file), then a handler coroutine serves it
// through the Image while the reader goes on to the next request. Handlers reply as
// they finish (completion order), each with one send: the Stream gathers replies that
// are ready together into one socket write (with TLS, into full records), and a READ's
// reply header sits in its data buffer's headroom so header and data leave as one
// span. Credits bound what a client can have in flight: requests, and payload bytes.
//
// A WRITE is acknowledged only after the image completed it; FUA and FLUSH reach
// stable storage before their reply. DISC, a closed connection or a protocol violation
// (bad magic, a request cut short) end the session after the requests in flight are
// finished and answered.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/asio.hpp"
#include "engine/buffer_pool.hpp"
#include "engine/credits.hpp"
#include "engine/error.hpp"
#include "engine/grace_period.hpp"
#include "engine/net/stream.hpp"
#include "engine/task_group.hpp"
#include "engine/uring/pipe_pool.hpp"
#include "protocols/nbd/server/exports.hpp"
#include "protocols/nbd/server/handshake.hpp"
#include "protocols/nbd/server/request_checks.hpp"
#include "protocols/nbd/server/request_reader.hpp"

namespace sluice::nbd {

// A stretch of a structured READ: data, or a hole sent as OFFSET_HOLE.
struct ReadRun {
  std::uint64_t from;  // relative to the request's offset
  std::uint64_t length;
  bool hole;
};

class Transmission {
 public:
  // `interrupt_reading` makes a pending read of the stream end (shutdown of the
  // socket's read side); stop() uses it.
  Transmission(executor ex, Stream& stream, const Negotiated& negotiated, const ServerConfig& config,
               std::function<void()> interrupt_reading);
  ~Transmission();
  Transmission(const Transmission&) = delete;
  Transmission& operator=(const Transmission&) = delete;

  // Serves requests until the session ends; fails on a protocol violation or a broken
  // connection, after the requests in flight are done.
  awaitable<Status> run();

  // The server is shutting down: requests read from now on are answered ESHUTDOWN,
  // and reading stops once nothing is in flight. A client still owing the rest of a
  // request, or not reading its replies, when the grace period runs out is cut off,
  // and run() fails naming what it had outstanding.
  void stop();

  // A write, zero or trim completed since the session began.
  bool wrote() const { return wrote_; }
  std::size_t requests_served() const { return served_; }

 private:
  struct Request;
  class Lease;
  class PipeLease;

  awaitable<Status> read_requests(TaskGroup& handlers);
  awaitable<Status> handle(std::unique_ptr<Request> request);
  awaitable<Status> serve_read(Request& request);
  // A structured READ whose data is spliced from the image (no buffer).
  bool reads_by_pipe(const RequestHeader& header) const;
  // A WRITE whose payload is spliced from the socket into a pipe (no buffer).
  bool writes_by_pipe(const RequestHeader& header) const;
  awaitable<Status> send_runs_piped(const RequestHeader& header, const std::vector<ReadRun>& runs);
  awaitable<Status> send_data_piped(const RequestHeader& header, std::uint64_t from, std::uint64_t length,
                                    bool last_run, bool& ended);
  awaitable<Status> send_data_buffered(const RequestHeader& header, std::uint64_t from, std::uint64_t length,
                                      bool last_run, bool& ended);
  awaitable<Status> serve_block_status(Request& request);
  awaitable<Status> reply_ok(std::uint64_t cookie);
  awaitable<Status> reply_error(const RequestHeader& header, Errno error, const std::string& message);
  // Takes `length`'s share of the byte budget, then a buffer.
  awaitable<Result<Buffer>> buffer_for(std::size_t length, Lease& bytes);
  awaitable<Result<Buffer>> pooled_buffer(std::size_t length);
  // A WRITE's payload into a pipe, or where the pipe cannot take it all, into memory.
  awaitable<Status> receive_payload_piped(Request& request);
  void request_done(std::uint64_t arrival);
  // A request counted in flight whose reading failed: it will get no reply.
  void request_dropped(std::uint64_t arrival);
  // Keeps a request counted from its header until handle() takes it over.
  struct InFlightUntilHandled {
    Transmission& transmission;
    std::uint64_t arrival;
    bool handed_over = false;
    ~InFlightUntilHandled();
  };
  void interrupt();
  // The grace period ran out: the client is cut off.
  void cut_off();
  Error cut_off_error() const;

  executor ex_;
  Stream& stream_;
  Image& image_;
  std::string export_name_;
  const ServerConfig& config_;
  TransmissionTerms terms_;
  std::uint32_t allocation_context_id_;
  std::function<void()> interrupt_reading_;
  RequestReader reader_;
  Credits requests_;
  Credits byte_units_;
  // Buffers by size class (4 KiB << index), made on first use and reused after.
  static constexpr std::size_t size_classes = 14;  // up to 32 MiB
  std::array<std::unique_ptr<BufferPool>, size_classes> pools_;
  bool piped_reads_ = false;
  bool piped_writes_ = false;
  PipePool pipes_;
  GracePeriod grace_;
  // The requests in flight, from their header on, by order of arrival: what a client
  // cut off at shutdown had outstanding.
  std::map<std::uint64_t, RequestHeader> in_flight_;
  std::uint64_t arrivals_ = 0;
  // The request whose WRITE payload is being read, if one is.
  std::optional<std::uint64_t> arriving_;
  std::optional<Error> cut_off_;
  std::size_t served_ = 0;
  bool stopping_ = false;
  bool interrupted_ = false;
  bool wrote_ = false;
};

}  // namespace sluice::nbd
