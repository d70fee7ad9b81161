// Test helper: a scripted NBD server on one end of a socket pair, for the cases no
// real server produces (bad magics, unknown cookies, malformed or reordered chunks).
// It speaks the handshake with the protocol's own encoders; each test then reads
// requests and sends whatever replies it wants. The client under test runs its real
// code (negotiate, Connection) on the other end.
#pragma once

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/asio.hpp"
#include "engine/net/socket_stream.hpp"
#include "protocols/nbd/big_endian.hpp"
#include "protocols/nbd/handshake_messages.hpp"
#include "protocols/nbd/transmission_messages.hpp"

namespace sluice::test {

struct FakeServerOptions {
  // fixed newstyle (options), newstyle without the fixed flag (EXPORT_NAME only, any
  // other option is refused by hanging up), or oldstyle (no options at all).
  enum class Style { fixed_newstyle, newstyle, oldstyle };
  Style style = Style::fixed_newstyle;
  bool structured_replies = true;
  bool go = true;  // false: GO is answered ERR_UNSUP, so the client must use EXPORT_NAME
  std::uint64_t size = 1 << 20;
  std::uint16_t flags = nbd::transmission_flag::has_flags | nbd::transmission_flag::send_flush |
                        nbd::transmission_flag::send_write_zeroes;
  std::optional<BlockSizes> block_sizes;
  std::uint32_t allocation_context = 1;
  // Each option is answered this long after it arrived (a far-away server).
  std::chrono::milliseconds option_delay{0};
};

// A connected pair of Unix stream sockets on `ex`.
inline std::pair<Socket, Socket> socket_pair(executor ex) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
  Socket a(ex), b(ex);
  a.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), fds[0]);
  b.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), fds[1]);
  return {std::move(a), std::move(b)};
}

inline std::vector<std::byte> filled(std::size_t n, unsigned char value) {
  return std::vector<std::byte>(n, std::byte{value});
}

inline std::vector<std::byte> simple_reply(std::uint64_t cookie, nbd::Errno error = nbd::Errno::none) {
  auto head = nbd::encode_simple_reply_header({error, cookie});
  return {head.begin(), head.end()};
}

class FakeServer {
 public:
  explicit FakeServer(Socket socket) : stream_(std::move(socket)) {}

  // Fixed newstyle up to GO (or EXPORT_NAME): answers STRUCTURED_REPLY,
  // SET_META_CONTEXT base:allocation and GO as `options` says.
  awaitable<Status> handshake(FakeServerOptions options) {
    using namespace nbd;
    using Style = FakeServerOptions::Style;
    if (options.style == Style::oldstyle) {
      std::vector<std::byte> hello;
      append_u64(hello, nbd_magic);
      append_u64(hello, oldstyle_magic);
      append_u64(hello, options.size);
      append_u32(hello, options.flags);
      hello.resize(oldstyle_prefix_size + oldstyle_body_size);
      co_return co_await stream_.send(Frame{{}, hello});
    }
    const std::uint16_t offered = options.style == Style::fixed_newstyle
                                      ? handshake_flag::fixed_newstyle | handshake_flag::no_zeroes
                                      : handshake_flag::no_zeroes;
    auto greeting = encode_greeting(offered);
    if (Status s = co_await stream_.send(Frame{{}, greeting}); !s) co_return s;
    std::array<std::byte, client_flags_size> flags{};
    if (Status s = co_await stream_.read_exactly(flags); !s) co_return s;
    auto client_flags = decode_client_flags(flags, offered);
    if (!client_flags) co_return tl::unexpected(client_flags.error());
    for (;;) {
      std::array<std::byte, option_header_size> head{};
      if (Status s = co_await stream_.read_exactly(head); !s) co_return s;
      auto header = decode_option_header(head);
      if (!header) co_return tl::unexpected(header.error());
      options_seen_.push_back(header->option);
      std::vector<std::byte> data(header->length);
      if (!data.empty()) {
        if (Status s = co_await stream_.read_exactly(data); !s) co_return s;
      }
      if (options.style == Style::newstyle && header->option != Option::export_name)
        co_return fail(std::errc::protocol_error,
                       "the client sent " + to_string(header->option) + " to a server without fixed newstyle");
      if (options.option_delay.count() > 0) {
        asio::steady_timer timer(co_await asio::this_coro::executor, options.option_delay);
        co_await timer.async_wait(use_nothrow);
      }
      std::vector<std::byte> reply;
      switch (header->option) {
        case Option::structured_reply:
          reply = options.structured_replies ? encode_ack(Option::structured_reply)
                                             : encode_error_reply(Option::structured_reply, OptionReplyType::err_unsup);
          break;
        case Option::set_meta_context: {
          auto context = encode_meta_context_reply(Option::set_meta_context, options.allocation_context,
                                                   base_allocation_context);
          reply = *context;
          auto ack = encode_ack(Option::set_meta_context);
          reply.insert(reply.end(), ack.begin(), ack.end());
          break;
        }
        case Option::go:
          if (!options.go) {
            reply = encode_error_reply(Option::go, OptionReplyType::err_unsup);
            break;
          }
          reply = encode_info_export(Option::go, options.size, options.flags);
          if (options.block_sizes) {
            auto sizes = encode_info_block_size(Option::go, *options.block_sizes);
            reply.insert(reply.end(), sizes.begin(), sizes.end());
          }
          {
            auto ack = encode_ack(Option::go);
            reply.insert(reply.end(), ack.begin(), ack.end());
          }
          co_return co_await stream_.send(Frame{{}, reply});
        case Option::export_name:
          reply = encode_export_name_reply(ExportInfo{options.size, options.flags},
                                           (*client_flags & client_flag::no_zeroes) != 0);
          co_return co_await stream_.send(Frame{{}, reply});
        default: reply = encode_error_reply(header->option, OptionReplyType::err_unsup); break;
      }
      if (Status s = co_await stream_.send(Frame{{}, reply}); !s) co_return s;
    }
  }

  // The next request; a WRITE's payload goes into `payload` when given.
  awaitable<Result<nbd::RequestHeader>> request(std::vector<std::byte>* payload = nullptr) {
    std::array<std::byte, nbd::request_header_size> head{};
    if (Status s = co_await stream_.read_exactly(head); !s) co_return tl::unexpected(s.error());
    auto header = nbd::decode_request_header(head);
    if (!header) co_return header;
    if (header->command == nbd::Command::write) {
      std::vector<std::byte> data(header->length);
      if (Status s = co_await stream_.read_exactly(data); !s) co_return tl::unexpected(s.error());
      if (payload) *payload = std::move(data);
    }
    co_return header;
  }

  awaitable<Status> send(std::span<const std::byte> bytes) { co_return co_await stream_.send(Frame{{}, bytes}); }

  SocketStream& stream() { return stream_; }

  // Every option the client sent, in order.
  const std::vector<nbd::Option>& options_seen() const { return options_seen_; }

 private:
  SocketStream stream_;
  std::vector<nbd::Option> options_seen_;
};

}  // namespace sluice::test
