#include "protocols/common/receive_writer.hpp"

#include <algorithm>
#include <string>

#include "engine/uring/file_ring.hpp"

namespace sluice {

ReceiveWriter::ReceiveWriter(executor ex, Destination& destination, const ReceiveOptions& options,
                             StreamReader& reader)
    : destination_(destination),
      reader_(reader),
      splicing_(options.zero_copy && reader.stream().splices() && destination.traits().takes_pipes),
      options_(options),
      pool_(ex, options.depth == 0 ? 1 : options.depth, options.piece),
      pipes_(ex, options.depth == 0 ? 1 : options.depth),
      writes_(ex,
              [this](const Error&) {
                pool_.close();
                pipes_.close();
                destination_.abort();
                reader_.stream().stop_receiving();  // serve resets the connection next
              }),
      started_(std::chrono::steady_clock::now()) {
  // Headers are then read exactly, so every payload byte is still in the socket.
  if (splicing_) reader_.stop_read_ahead();
}

awaitable<Result<std::size_t>> ReceiveWriter::receive(std::uint64_t offset, std::size_t length) {
  // Bytes the reader already holds (the start of a body after HTTP headers) go
  // through memory; the rest is spliced when it can be.
  std::size_t done = 0;
  if (splicing_ && reader_.buffered() > 0) {
    const std::size_t held = std::min(length, reader_.buffered());
    auto n = co_await receive_buffered(offset, held);
    if (!n || *n < held) co_return n;
    done = held;
  }
  // Named, not a temporary inside `?:` (g++ 12 coroutine lifetime bug).
  Result<std::size_t> rest;
  if (splicing_)
    rest = co_await receive_spliced(offset + done, length - done);
  else
    rest = co_await receive_buffered(offset + done, length - done);
  if (!rest) co_return rest;
  co_return done + *rest;
}

awaitable<Result<std::size_t>> ReceiveWriter::receive_buffered(std::uint64_t offset, std::size_t length) {
  std::size_t done = 0;
  while (done < length) {
    auto buffer = co_await acquire();
    if (!buffer) co_return tl::unexpected(buffer.error());
    buffer->truncate(std::min(length - done, buffer->size()));
    const std::size_t wanted = buffer->size();
    auto n = co_await reader_.read_up_to(buffer->writable());
    if (!n) co_return tl::unexpected(n.error());
    buffer->truncate(*n);
    if (*n > 0) {
      if (Status s = co_await write(offset + done, std::move(*buffer)); !s) co_return tl::unexpected(s.error());
    }
    done += *n;
    if (*n < wanted) break;  // the stream ended
  }
  co_return done;
}

awaitable<Result<std::size_t>> ReceiveWriter::receive_spliced(std::uint64_t offset, std::size_t length) {
  FileRing& ring = FileRing::of(co_await asio::this_coro::executor);
  const int socket = reader_.stream().socket_fd();
  std::size_t done = 0;
  while (done < length) {
    if (writes_.failed()) {
      Status first = co_await drain();
      co_return tl::unexpected(first ? Error{std::make_error_code(std::errc::operation_canceled), "cancelled"}
                                     : first.error());
    }
    auto pipe = co_await pipes_.acquire();
    if (!pipe) {
      Status first = co_await drain();
      co_return tl::unexpected(first ? pipe.error() : first.error());
    }
    // One splice: what has arrived, up to the pipe's size. The pipe starts empty, so the
    // splice never waits for room in it.
    const std::size_t wanted = std::min(length - done, (*pipe)->capacity());
    int n = co_await splice_socket_to_pipe(ring, socket, **pipe, wanted);
    if (n <= 0) {
      pipes_.release(*pipe, n == 0);
      if (n == 0) break;  // the stream ended
      co_return fail(errno_code(-n), "receiving from " + reader_.stream().peer() + ": " + errno_code(-n).message());
    }
    reader_.advance(static_cast<std::size_t>(n));
    if (Status s = co_await write_piped(offset + done, static_cast<std::size_t>(n), *pipe); !s) {
      co_return tl::unexpected(s.error());
    }
    done += static_cast<std::size_t>(n);
  }
  co_return done;
}

awaitable<Result<Buffer>> ReceiveWriter::acquire() {
  auto buffer = co_await pool_.acquire();
  if (!buffer || writes_.failed()) {
    Status first = co_await drain();
    if (!first) co_return tl::unexpected(first.error());
    if (!buffer) co_return tl::unexpected(buffer.error());
  }
  co_return buffer;
}

awaitable<Status> ReceiveWriter::order_after_overlaps(std::uint64_t offset, std::uint64_t length) {
  if (writes_.failed()) co_return co_await drain();
  if (offset < issued_end_) {
    if (Status s = co_await drain(); !s) co_return s;
  }
  issued_end_ = std::max(issued_end_, offset + length);
  ++writes_issued_;
  co_return Status{};
}

awaitable<Status> ReceiveWriter::write(std::uint64_t offset, Buffer data) {
  if (Status s = co_await order_after_overlaps(offset, data.size()); !s) co_return s;
  writes_.spawn(write_one(offset, std::move(data)));
  co_return Status{};
}

awaitable<Status> ReceiveWriter::write_one(std::uint64_t offset, Buffer data) {
  const std::uint64_t length = data.size();
  Status status = co_await destination_.write(offset, std::move(data));
  if (!status) co_return status;
  completed(length);
  co_return Status{};
}

awaitable<Status> ReceiveWriter::write_piped(std::uint64_t offset, std::size_t length, Pipe* pipe) {
  if (Status s = co_await order_after_overlaps(offset, length); !s) {
    pipes_.release(pipe, false);
    co_return s;
  }
  writes_.spawn(write_from_pipe(offset, length, pipe));
  co_return Status{};
}

awaitable<Status> ReceiveWriter::write_from_pipe(std::uint64_t offset, std::size_t length, Pipe* pipe) {
  Status status = co_await destination_.write_from_pipe(offset, length, pipe->read_end());
  pipes_.release(pipe, bool(status));
  if (!status) co_return status;
  completed(length);
  co_return Status{};
}

void ReceiveWriter::completed(std::uint64_t length) {
  done_ += length;
  if (options_.progress) {
    options_.progress(ProgressUpdate{
        done_, options_.image_size,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()});
  }
}

awaitable<Status> ReceiveWriter::drain() {
  Status status = co_await writes_.join();
  issued_end_ = 0;
  co_return status;
}

awaitable<Result<ReceiveResult>> ReceiveWriter::finish(std::uint64_t bytes_received) {
  if (Status s = co_await drain(); !s) co_return tl::unexpected(s.error());
  // Success is reported only for data on stable storage.
  if (Status s = co_await destination_.flush(); !s) co_return tl::unexpected(s.error());
  if (Status s = co_await destination_.finish(); !s) co_return tl::unexpected(s.error());
  ReceiveResult result;
  result.bytes_received = bytes_received;
  result.bytes_written = done_;
  result.writes = writes_issued_;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  co_return result;
}

}  // namespace sluice
