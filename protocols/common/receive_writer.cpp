#include "protocols/common/receive_writer.hpp"

namespace sluice {

ReceiveWriter::ReceiveWriter(executor ex, Destination& destination, const ReceiveOptions& options,
                             std::function<void()> on_failure)
    : destination_(destination),
      options_(options),
      pool_(ex, options.depth == 0 ? 1 : options.depth, options.piece),
      writes_(ex,
              [this, on_failure = std::move(on_failure)] {
                pool_.close();
                destination_.abort();
                if (on_failure) on_failure();
              }),
      started_(std::chrono::steady_clock::now()) {}

awaitable<Result<Buffer>> ReceiveWriter::acquire() {
  auto buffer = co_await pool_.acquire();
  if (!buffer || writes_.failed()) {
    Status first = co_await drain();
    if (!first) co_return tl::unexpected(first.error());
    if (!buffer) co_return tl::unexpected(buffer.error());
  }
  co_return buffer;
}

awaitable<Status> ReceiveWriter::write(std::uint64_t offset, Buffer data) {
  if (writes_.failed()) co_return co_await drain();
  if (offset < issued_end_) {
    if (Status s = co_await drain(); !s) co_return s;
  }
  issued_end_ = std::max(issued_end_, offset + data.size());
  ++writes_issued_;
  writes_.spawn(write_one(offset, std::move(data)));
  co_return Status{};
}

awaitable<Status> ReceiveWriter::write_one(std::uint64_t offset, Buffer data) {
  const std::uint64_t length = data.size();
  Status status = co_await destination_.write(offset, std::move(data));
  if (!status) co_return status;
  done_ += length;
  if (options_.progress) {
    options_.progress(ProgressUpdate{
        done_, options_.image_size,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()});
  }
  co_return Status{};
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
