// The reply-reader half of Connection: reads every reply and completes its request.
//
// A handler returns an error only when the connection itself is broken (the stream
// failed, or the server broke the protocol); the reader then fails every request in
// flight. A server's error reply is an ordinary result for its one request.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "protocols/nbd/client/connection.hpp"
#include "protocols/nbd/wire_text.hpp"

namespace sluice::nbd {

namespace {

std::string hex_cookie(std::uint64_t cookie) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(cookie));
  return text;
}

}  // namespace

Error Connection::violation(const std::string& what) const {
  return Error{std::make_error_code(std::errc::protocol_error),
               "the NBD server at " + peer_ + " broke the protocol: " + what};
}

Connection::Request* Connection::find(std::uint64_t cookie) {
  auto it = pending_.find(cookie);
  return it == pending_.end() ? nullptr : it->second;
}

void Connection::lost(const Error& error) {
  // After disconnect() or a failure, the stream ending is expected.
  if (disconnecting_ || failure_) return;
  fail(Error{error.code, "the connection to " + peer_ + " broke: " + error.message});
}

awaitable<Status> Connection::read_exactly(std::span<std::byte> into) {
  Status s = co_await stream_->read_exactly(into);
  if (s) last_progress_ = clock::now();
  co_return s;
}

// Whatever arrives is a sign of life for the watchdog: a payload that takes longer
// than --timeout on a slow link still arrives, a little at a time.
awaitable<Status> Connection::read_data(std::span<std::byte> into) {
  const std::size_t wanted = into.size();
  while (!into.empty()) {
    auto got = co_await stream_->read_some(into);
    if (!got) co_return tl::unexpected(got.error());
    if (*got == 0)
      co_return sluice::fail(std::errc::connection_reset, peer_ + " closed the connection (" +
                                                      std::to_string(wanted - into.size()) + " of " +
                                                      std::to_string(wanted) + " bytes read)");
    last_progress_ = clock::now();
    into = into.subspan(*got);
  }
  co_return Status{};
}

awaitable<Status> Connection::read_replies() {
  std::array<std::byte, chunk_header_size> head{};
  while (!failure_) {
    // Every reply starts with at least 16 bytes; a clean end of stream may only come
    // before the first of them.
    auto first = std::span(head).first<simple_reply_header_size>();
    auto got = co_await stream_->read_some(first);
    if (!got) {
      lost(got.error());
      break;
    }
    if (*got == 0) {
      if (!disconnecting_ && !failure_) {
        Error closed{std::make_error_code(std::errc::connection_reset),
                     "the connection to " + peer_ + " broke: the server closed it"};
        if (pending_.empty())
          failure_ = closed;  // nothing lost; later requests fail with this
        else
          fail(closed);
      }
      break;
    }
    last_progress_ = clock::now();
    if (*got < first.size()) {
      if (Status s = co_await read_exactly(first.subspan(*got)); !s) {
        lost(s.error());
        break;
      }
    }
    Status handled;
    auto kind = decode_reply_magic(first);
    if (!kind)
      handled = tl::unexpected(violation(kind.error().message));
    else if (*kind == ReplyKind::simple)
      handled = co_await on_simple_reply(first);
    else
      handled = co_await on_chunk(head);
    if (!handled) {
      if (handled.error().code == std::errc::protocol_error)
        fail(handled.error());
      else
        lost(handled.error());
    }
    settle_in_hand();
    if (!handled) break;
  }
  stop_watchdog();
  co_return Status{};
}

awaitable<Status> Connection::on_simple_reply(std::span<const std::byte> head) {
  auto header = decode_simple_reply_header(head);
  if (!header) co_return tl::unexpected(violation(header.error().message));
  Request* r = find(header->cookie);
  if (r == nullptr)
    co_return tl::unexpected(violation("a simple reply for cookie " + hex_cookie(header->cookie) +
                                       ", which matches no request in flight"));
  in_hand_ = r;
  if (r->assembler) {
    if (Status ok = r->assembler->check_simple_reply(header->error != Errno::none); !ok)
      co_return tl::unexpected(violation(ok.error().message));
  }
  if (header->error != Errno::none) {
    complete(header->cookie, tl::unexpected(server_error(*r, header->error, {})));
    co_return Status{};
  }
  if (r->header.command == Command::block_status)
    co_return tl::unexpected(violation("a simple reply to " + describe(*r) + ", which needs a structured one"));
  if (r->header.command == Command::read) {
    // With a simple reply the data follows at once, all of it, no matter what.
    if (Status s = co_await read_data(r->into); !s) co_return s;
  }
  complete(header->cookie, Status{});
  co_return Status{};
}

awaitable<Status> Connection::on_chunk(std::span<std::byte> head) {
  // The first 16 bytes are in; the length completes the header.
  if (Status s = co_await read_exactly(head.subspan(simple_reply_header_size)); !s) co_return s;
  auto header = decode_chunk_header(head);
  if (!header) co_return tl::unexpected(violation(header.error().message));
  if (!facts_.structured_replies)
    co_return tl::unexpected(violation("a structured reply chunk, but structured replies were not negotiated"));
  Request* r = find(header->cookie);
  if (r == nullptr)
    co_return tl::unexpected(violation("a " + to_string(header->type) + " chunk for cookie " +
                                       hex_cookie(header->cookie) + ", which matches no request in flight"));
  in_hand_ = r;
  switch (r->header.command) {
    case Command::read: co_return co_await on_read_chunk(*r, *header);
    case Command::block_status: co_return co_await on_block_status_chunk(*r, *header);
    default: co_return co_await on_other_chunk(*r, *header);
  }
}

awaitable<Result<ErrorChunk>> Connection::read_error_chunk(const ChunkHeader& header) {
  std::vector<std::byte> payload(header.length);  // bounded by decode_chunk_header
  if (Status s = co_await read_exactly(payload); !s) co_return tl::unexpected(s.error());
  auto chunk = decode_error_chunk(header.type, payload);
  if (!chunk) co_return tl::unexpected(violation(chunk.error().message));
  co_return chunk;
}

awaitable<Status> Connection::on_read_chunk(Request& r, const ChunkHeader& header) {
  ReadReplyAssembler& assembler = *r.assembler;
  if (Status ok = assembler.check_chunk(header); !ok) co_return tl::unexpected(violation(ok.error().message));
  const std::uint64_t base = r.header.offset;
  switch (header.type) {
    case ReplyType::offset_data: {
      std::array<std::byte, offset_data_prefix_size> prefix{};
      if (Status s = co_await read_exactly(prefix); !s) co_return s;
      auto range = decode_offset_data_prefix(prefix, header.length);
      if (!range) co_return tl::unexpected(violation(range.error().message));
      if (Status ok = assembler.add_data(*range); !ok) co_return tl::unexpected(violation(ok.error().message));
      if (Status s = co_await read_data(r.into.subspan(range->offset - base, range->length)); !s) co_return s;
      break;
    }
    case ReplyType::offset_hole: {
      std::array<std::byte, 12> payload{};
      if (Status s = co_await read_exactly(payload); !s) co_return s;
      auto range = decode_offset_hole(payload);
      if (!range) co_return tl::unexpected(violation(range.error().message));
      if (Status ok = assembler.add_hole(*range); !ok) co_return tl::unexpected(violation(ok.error().message));
      auto hole = r.into.subspan(range->offset - base, range->length);
      std::memset(hole.data(), 0, hole.size());
      break;
    }
    case ReplyType::none: break;
    default: {
      auto chunk = co_await read_error_chunk(header);
      if (!chunk) co_return tl::unexpected(chunk.error());
      if (Status ok = assembler.add_error(*chunk); !ok) co_return tl::unexpected(violation(ok.error().message));
      break;
    }
  }
  if (header.done()) {
    // The assembler's errors name the READ, its offset and the server's answer.
    complete(header.cookie, assembler.finish());
  }
  co_return Status{};
}

awaitable<Status> Connection::on_block_status_chunk(Request& r, const ChunkHeader& header) {
  switch (header.type) {
    case ReplyType::block_status: {
      std::vector<std::byte> payload(header.length);  // bounded by decode_chunk_header
      if (Status s = co_await read_exactly(payload); !s) co_return s;
      auto status = decode_block_status(payload);
      if (!status) co_return tl::unexpected(violation(status.error().message));
      // Only base:allocation was asked for; a context we did not ask about is ignored.
      if (status->context_id != facts_.allocation_context) break;
      if (r.got_extents)
        co_return tl::unexpected(violation("two base:allocation chunks for " + describe(r)));
      auto extents = to_extents(status->descriptors, r.header.offset);
      if (!extents) co_return tl::unexpected(violation(extents.error().message));
      r.extents = std::move(*extents);
      r.got_extents = true;
      break;
    }
    case ReplyType::none: break;
    default: {
      if (!is_error(header.type))
        co_return tl::unexpected(violation("a " + to_string(header.type) + " chunk in reply to " + describe(r)));
      auto chunk = co_await read_error_chunk(header);
      if (!chunk) co_return tl::unexpected(chunk.error());
      if (!r.error) r.error = server_error(r, chunk->error, printable(chunk->message, max_string_length));
      break;
    }
  }
  if (header.done()) {
    Status outcome;
    if (r.error)
      outcome = tl::unexpected(*r.error);
    else if (!r.got_extents)
      outcome = tl::unexpected(request_error(r, violation("the reply carried no base:allocation extents")));
    complete(header.cookie, std::move(outcome));
  }
  co_return Status{};
}

awaitable<Status> Connection::on_other_chunk(Request& r, const ChunkHeader& header) {
  if (header.type != ReplyType::none) {
    if (!is_error(header.type))
      co_return tl::unexpected(violation("a " + to_string(header.type) + " chunk in reply to " + describe(r)));
    auto chunk = co_await read_error_chunk(header);
    if (!chunk) co_return tl::unexpected(chunk.error());
    if (!r.error) r.error = server_error(r, chunk->error, printable(chunk->message, max_string_length));
  }
  if (header.done()) complete(header.cookie, r.error ? Status(tl::unexpected(*r.error)) : Status{});
  co_return Status{};
}

}  // namespace sluice::nbd
