#include "protocols/common/stream_reader.hpp"

#include <algorithm>
#include <cstring>

namespace sluice {

StreamReader::StreamReader(Stream& stream, std::size_t read_ahead) : stream_(stream), buffer_(read_ahead) {}

awaitable<Result<std::size_t>> StreamReader::read_up_to(std::span<std::byte> into) {
  std::size_t done = std::min(into.size(), end_ - begin_);
  if (done > 0) std::memcpy(into.data(), buffer_.data() + begin_, done);
  begin_ += done;
  while (done < into.size()) {
    const std::size_t wanted = into.size() - done;
    // Large remainders go straight into the caller's memory; small ones refill the
    // read-ahead so the next header costs no system call of its own.
    if (!read_ahead_ || wanted >= buffer_.size() / 4) {
      auto n = co_await stream_.read_some(into.subspan(done));
      if (!n) co_return tl::unexpected(n.error());
      if (*n == 0) break;
      arrived(*n);
      done += *n;
      continue;
    }
    begin_ = end_ = 0;
    auto n = co_await stream_.read_some(buffer_);
    if (!n) co_return tl::unexpected(n.error());
    if (*n == 0) break;
    arrived(*n);
    end_ = *n;
    std::size_t take = std::min(wanted, end_);
    std::memcpy(into.data() + done, buffer_.data(), take);
    begin_ = take;
    done += take;
  }
  position_ += done;
  co_return done;
}

awaitable<Result<std::span<const std::byte>>> StreamReader::peek() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
    auto n = co_await stream_.read_some(buffer_);
    if (!n) co_return tl::unexpected(n.error());
    arrived(*n);
    end_ = *n;
  }
  co_return std::span<const std::byte>(buffer_.data() + begin_, end_ - begin_);
}

void StreamReader::consume(std::size_t n) {
  n = std::min(n, end_ - begin_);
  begin_ += n;
  position_ += n;
}

}  // namespace sluice
