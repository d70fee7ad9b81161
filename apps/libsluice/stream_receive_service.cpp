// Receiving Chunked and raw streams (`sluice serve --protocol chunked|raw [--http]`):
// each connection's stream is written into --output, as vhd-tool's `serve` does for xapi: the output is opened for every
// connection without being truncated (it is usually the attached disk), and success
// is reported only once the data was flushed. `--output null:` keeps nothing: a link
// test, with every header still checked against --size.
#include <fcntl.h>
#include <cerrno>
#include <unistd.h>

#include <memory>
#include <set>

#include "apps/libsluice/receive_service.hpp"
#include "engine/net/deadline.hpp"
#include "engine/unique_fd.hpp"
#include "protocols/chunked/chunked_receiver.hpp"
#include "protocols/common/stream_reader.hpp"
#include "protocols/http/import_server.hpp"
#include "protocols/raw/raw_receiver.hpp"
#include "storage/file_destination.hpp"
#include "protocols/common/idle_watch.hpp"
#include "storage/file_facts.hpp"
#include "storage/null_destination.hpp"

namespace sluice {

namespace {


// The image's size: --size, or what the output already holds.
Result<std::uint64_t> image_size(const ReceiverOptions& options) {
  // The command line has refused --size 0, and null: without --size.
  if (options.size) return *options.size;
  auto opened = open_image_file(options.output, O_RDONLY);
  if (!opened) {
    Error error = opened.error();
    if (error.code == std::errc::no_such_file_or_directory) error.message += " (give --size to create it)";
    return tl::unexpected(std::move(error));
  }
  UniqueFd fd = std::move(*opened);
  auto info = inspect_image_file(fd.get(), options.output);
  if (!info) return tl::unexpected(info.error());
  if (info->size == 0)
    return fail(std::errc::invalid_argument, options.output + " is empty: give --size BYTES");
  return info->size;
}

Result<std::unique_ptr<Destination>> open_output(executor ex, const ReceiverOptions& options, std::uint64_t size) {
  if (options.output == null_output) return std::unique_ptr<Destination>(std::make_unique<NullDestination>());
  FileOptions file;
  file.direct = options.direct;
  file.keep_contents = true;
  auto output = FileDestination::open(ex, options.output, size, file);
  if (!output) return tl::unexpected(output.error());
  return std::unique_ptr<Destination>(std::move(*output));
}

// The transfers being received, so that abort() can cut them. The stream receiver
// runs on one loop, as does whatever touches this: no locks.
struct LiveTransfers {
  std::set<Stream*> streams;
  bool aborted = false;
  std::uint64_t connections = 0;  // numbers the senders for ReceiveProgress

  void abort() {
    aborted = true;
    for (Stream* stream : streams) stream->stop_receiving();
  }
};

awaitable<Status> serve_connection(executor ex, std::shared_ptr<const ReceiverOptions> options,
                                   std::shared_ptr<LiveTransfers> live, std::unique_ptr<Stream> stream) {
  const std::string peer = stream->peer();
  live->streams.insert(stream.get());
  struct Unlist {
    LiveTransfers& live;
    Stream* stream;
    ~Unlist() { live.streams.erase(stream); }
  } unlist{*live, stream.get()};
  auto failed = [&](const Error& e) -> Status {
    return fail(e.code, peer + ": " + e.message);
  };
  StreamReader reader(*stream);
  IdleWatch idle(ex, reader, options->idle_timeout);
  auto idle_error = [&] {
    return Error{std::make_error_code(std::errc::timed_out),
                 "the sender sent nothing for " + std::to_string(options->idle_timeout.count()) +
                     " seconds (--idle-timeout); dropped"};
  };
  // The image's size first: the HTTP import judges a raw request's length against it
  // before answering.
  auto size = image_size(*options);
  if (!size) {
    stream->reset();
    co_return failed(size.error());
  }
  ImportFraming framing = options->protocol == "raw" ? ImportFraming::raw : ImportFraming::chunked;
  if (options->http) {
    ImportPolicy policy;
    policy.image_size = *size;
    if (options->protocol_fixed) policy.framing = framing;
    policy.paths = options->http_paths;
    // The request head is the handshake of the HTTP import: bounded as a whole, as the
    // TLS handshake is. --idle-timeout alone would let a client that sends a byte now
    // and then hold the one slot a file output has for as long as it likes.
    Deadline deadline(ex, options->handshake_timeout, stream->socket_fd(), stream.get());
    auto accepted = co_await answer_http_import(reader, policy);
    deadline.disarm();
    if (!accepted && deadline.fired())
      co_return failed(Error{std::make_error_code(std::errc::timed_out),
                             "the HTTP request did not arrive within " +
                                 std::to_string(options->handshake_timeout.count()) +
                                 " seconds (--handshake-timeout); dropped"});
    if (!accepted) {
      co_await stream->close();
      co_return failed(idle.expired() ? idle_error() : accepted.error());
    }
    framing = accepted->framing;
  }
  auto output = open_output(ex, *options, *size);
  if (!output) {
    stream->reset();
    co_return failed(output.error());
  }

  ReceiveOptions receive;
  receive.image_size = *size;
  receive.zero_copy = options->zero_copy;
  const std::uint64_t connection = ++live->connections;
  if (options->progress)
    receive.progress = [options, connection](const ProgressUpdate& update) {
      options->progress(ReceiveProgress{connection, update, false, false});
    };
  // Not a conditional expression: g++ 12 destroys the temporary of a co_await inside
  // `?:` twice.
  Result<ReceiveResult> result;
  if (framing == ImportFraming::raw)
    result = co_await receive_raw(reader, **output, receive);
  else
    result = co_await receive_chunked(reader, **output, receive);
  if (options->progress)
    options->progress(ReceiveProgress{connection, ProgressUpdate{result ? *size : 0, *size, result ? result->seconds : 0},
                                      true, bool(result)});
  if (!result) {
    // A reset, not a close: the sender, which gets no reply in these protocols, must
    // not take the end of the connection for the receiver's success.
    stream->reset();
    if (live->aborted)
      co_return failed(Error{std::make_error_code(std::errc::interrupted),
                             "aborted after " +
                                 std::to_string(reader.position()) + " bytes; " + options->output +
                                 " is incomplete"});
    co_return failed(idle.expired() ? idle_error() : result.error());
  }
  co_await stream->close();
  if (options->received)
    options->received(ReceivedImage{connection, peer, options->output, result->bytes_written, result->writes,
                                    result->seconds, stream->stats().tls_cipher});
  co_return Status{};
}

}  // namespace

Result<ReceiveService> make_stream_receive_service(executor ex, const ReceiverOptions& options) {
  // Check the output up front, so a misconfigured server fails at start, not on the
  // first connection.
  auto size = image_size(options);
  if (!size) return tl::unexpected(size.error());
  // Opened as every transfer opens it: writable, a file or a device, and able to hold
  // --size (a file is created and grown to it, as the first transfer would; a device
  // must be that large). A directory, a read-only file, or a size the filesystem
  // cannot have (--size 8E) is then found at start, not by every sender.
  if (auto output = open_output(ex, options, *size); !output) return tl::unexpected(output.error());
  auto shared = std::make_shared<const ReceiverOptions>(options);
  auto live = std::make_shared<LiveTransfers>();
  ReceiveService service;
  service.handler = [ex, shared, live](std::unique_ptr<Stream> stream, ServingGate&) {
    return serve_connection(ex, shared, live, std::move(stream));
  };
  service.abort = [live] { live->abort(); };
  return service;
}

}  // namespace sluice
