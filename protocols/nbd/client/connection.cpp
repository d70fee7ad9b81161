#include "protocols/nbd/client/connection.hpp"

#include <cassert>
#include <utility>

namespace sluice::nbd {

Connection::Request::Request(executor ex, Command command, std::uint64_t offset, std::uint32_t length,
                             std::uint16_t flags)
    : header{flags, command, 0, offset, length}, done(ex) {}

Connection::Connection(executor ex, std::unique_ptr<Stream> stream, NegotiatedExport facts,
                       std::chrono::seconds timeout)
    : ex_(ex),
      stream_(std::move(stream)),
      facts_(std::move(facts)),
      peer_(stream_->peer()),
      timeout_(timeout),
      watchdog_(ex),
      tasks_(ex) {}

Connection::~Connection() {
  // The reader and the watchdog refer to this object: disconnect() must have waited
  // for them. Destroying a running connection would leave them touching freed memory.
  assert(tasks_.running() == 0 && "NBD connection destroyed without disconnect()");
}

void Connection::start() {
  last_progress_ = clock::now();
  tasks_.spawn(read_replies());
  if (timeout_.count() > 0) tasks_.spawn(watch());
}

std::string Connection::describe(const Request& r) const {
  const RequestHeader& h = r.header;
  std::string text = "NBD " + to_string(h.command);
  switch (h.command) {
    case Command::flush:
    case Command::disc: break;
    default:
      text += " of " + std::to_string(h.length) + " bytes at offset " + std::to_string(h.offset);
      break;
  }
  return text;
}

Error Connection::request_error(const Request& r, const Error& cause) const {
  return Error{cause.code, describe(r) + " failed: " + cause.message};
}

Error Connection::server_error(const Request& r, Errno error, const std::string& message) const {
  const std::error_code code = to_error_code(error);
  std::string text = describe(r) + " failed: the server (" + peer_ + ") answered " + to_string(error) + " (" +
                     code.message() + ")";
  if (!message.empty()) text += ": " + message;
  return Error{code, std::move(text)};
}

awaitable<void> Connection::send(Request& r, std::span<std::byte, request_header_size> head, FileSlice file,
                                 std::span<const std::byte> body) {
  if (failure_) {
    // Nothing is sent on a broken connection; the request fails with the reason.
    r.done.complete(tl::unexpected(request_error(r, *failure_)));
    co_return;
  }
  r.header.cookie = next_cookie_++;
  encode_request_header(r.header, head);
  // Silence while nothing was pending is not the server's fault.
  if (pending_.empty()) last_progress_ = clock::now();
  pending_.emplace(r.header.cookie, &r);
  Frame frame{head, body};
  frame.file = file;
  Status sent = co_await stream_->send(frame);
  if (sent) {
    // The server taking our bytes is a sign of life too: a slow link must not look
    // like a dead server while a large write is still on its way.
    last_progress_ = clock::now();
  } else if (!failure_) {
    fail(Error{sent.error().code, "the connection to " + peer_ + " broke: " + sent.error().message});
  }
}

awaitable<Status> Connection::send_and_wait(Request& r) {
  std::array<std::byte, request_header_size> head{};
  co_await send(r, head, FileSlice{}, {});
  co_return co_await r.done.wait();
}

awaitable<Status> Connection::read(std::uint64_t offset, std::span<std::byte> into) {
  Request r(ex_, Command::read, offset, static_cast<std::uint32_t>(into.size()));
  r.into = into;
  if (facts_.structured_replies) r.assembler.emplace(offset, r.header.length);
  co_return co_await send_and_wait(r);
}

awaitable<Status> Connection::write(std::uint64_t offset, Buffer data, std::uint16_t flags) {
  // The header goes right in front of the payload when there is room, so both leave as
  // one span (one iovec, one TLS record); otherwise the stream joins them. Once the
  // bytes are in the kernel the buffer goes back to its pool while the server writes
  // (replies carry only a cookie, so its header space is not needed either).
  const auto header_room =
      data.headroom() >= request_header_size ? data.prefix(request_header_size) : std::span<std::byte>{};
  co_return co_await write_lent(offset, data.bytes(), header_room, [&data] { data = Buffer{}; }, flags);
}

awaitable<Status> Connection::write_lent(std::uint64_t offset, std::span<const std::byte> data,
                                         std::span<std::byte> header_room, std::function<void()> sent,
                                         std::uint16_t flags) {
  Request r(ex_, Command::write, offset, static_cast<std::uint32_t>(data.size()), flags);
  std::array<std::byte, request_header_size> loose{};
  std::span<std::byte, request_header_size> head(loose);
  if (!header_room.empty()) head = header_room.first<request_header_size>();
  co_await send(r, head, FileSlice{}, data);
  sent();
  co_return co_await r.done.wait();
}

awaitable<Status> Connection::write(std::uint64_t offset, std::span<const std::byte> data, std::uint16_t flags) {
  Request r(ex_, Command::write, offset, static_cast<std::uint32_t>(data.size()), flags);
  std::array<std::byte, request_header_size> head{};
  co_await send(r, head, FileSlice{}, data);
  co_return co_await r.done.wait();
}

awaitable<Status> Connection::write_file(std::uint64_t offset, FileSlice slice, std::uint16_t flags) {
  Request r(ex_, Command::write, offset, static_cast<std::uint32_t>(slice.length), flags);
  std::array<std::byte, request_header_size> head{};
  co_await send(r, head, slice, {});
  co_return co_await r.done.wait();
}

awaitable<Status> Connection::write_zeroes(std::uint64_t offset, std::uint32_t length, std::uint16_t flags) {
  Request r(ex_, Command::write_zeroes, offset, length, flags);
  co_return co_await send_and_wait(r);
}

awaitable<Result<std::vector<Extent>>> Connection::block_status(std::uint64_t offset, std::uint32_t length) {
  Request r(ex_, Command::block_status, offset, length);
  if (Status s = co_await send_and_wait(r); !s) co_return tl::unexpected(s.error());
  co_return std::move(r.extents);
}

awaitable<Status> Connection::flush() {
  Request r(ex_, Command::flush, 0, 0);
  co_return co_await send_and_wait(r);
}

void Connection::complete(std::uint64_t cookie, Status status) {
  auto it = pending_.find(cookie);
  if (it == pending_.end()) return;
  Request* r = it->second;
  pending_.erase(it);
  r->done.complete(std::move(status));
}

void Connection::fail(Error cause) {
  if (!failure_) failure_ = cause;
  // The copy reports the first error it sees, so the likeliest culprit goes first: the
  // request whose reply the reader holds (a bad chunk, a read cut off) when there is
  // one, the oldest otherwise. The rest wait behind the held one (settle_in_hand).
  auto pending = std::move(pending_);
  pending_.clear();
  bool holding = false;
  for (auto& [cookie, r] : pending) holding = holding || r == in_hand_;
  for (auto& [cookie, r] : pending) {
    if (r == in_hand_)
      in_hand_failed_ = true;
    else if (holding)
      behind_in_hand_.push_back(r);
    else
      r->done.complete(tl::unexpected(request_error(*r, cause)));
  }
  stop_watchdog();
  stream_->abort();
}

void Connection::settle_in_hand() {
  Request* held = std::exchange(in_hand_, nullptr);
  if (held != nullptr && std::exchange(in_hand_failed_, false))
    held->done.complete(tl::unexpected(request_error(*held, *failure_)));
  for (Request* r : std::exchange(behind_in_hand_, {})) r->done.complete(tl::unexpected(request_error(*r, *failure_)));
}

void Connection::abort() {
  if (failure_ || disconnecting_) {
    stream_->abort();
    return;
  }
  fail(Error{std::make_error_code(std::errc::operation_canceled),
             "the connection to " + peer_ + " was stopped (another part of the transfer failed)"});
}

void Connection::stop_watchdog() {
  stopping_ = true;
  watchdog_.cancel();
}

awaitable<void> Connection::disconnect() {
  if (!failure_ && !disconnecting_) {
    disconnecting_ = true;
    if (!pending_.empty()) {
      fail(Error{std::make_error_code(std::errc::operation_canceled),
                 "the connection to " + peer_ + " was closed with the request in flight"});
    } else {
      // DISC has no reply; the server finishes what it has and hangs up. Nothing is in
      // flight, so a failure here loses nothing.
      auto disc = encode_request_header(RequestHeader{0, Command::disc, next_cookie_++, 0, 0});
      co_await stream_->send(Frame{{}, disc});
      co_await stream_->close();
    }
  } else {
    disconnecting_ = true;
    stream_->abort();
  }
  stop_watchdog();
  co_await tasks_.join();
}

awaitable<Status> Connection::watch() {
  while (!stopping_) {
    auto wait = std::chrono::duration_cast<clock::duration>(timeout_);
    if (!pending_.empty()) {
      // Bytes still leaving are life too: a write larger than the link moves in one
      // --timeout is sent a piece at a time.
      if (const std::uint64_t sent = stream_->stats().bytes_sent; sent != bytes_sent_seen_) {
        bytes_sent_seen_ = sent;
        last_progress_ = clock::now();
      }
      const auto idle = clock::now() - last_progress_;
      if (idle >= timeout_) {
        fail(Error{std::make_error_code(std::errc::timed_out),
                   "no reply from " + peer_ + " for " + std::to_string(timeout_.count()) +
                       " seconds (--timeout); the server stopped answering"});
        break;
      }
      wait -= idle;
    }
    watchdog_.expires_after(wait);
    co_await watchdog_.async_wait(use_nothrow);
  }
  co_return Status{};
}

}  // namespace sluice::nbd
