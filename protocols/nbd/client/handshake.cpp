#include "protocols/nbd/client/handshake.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <vector>

#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "protocols/nbd/block_size_rules.hpp"
#include "protocols/nbd/handshake_messages.hpp"

namespace sluice::nbd {

namespace {

struct OptionReply {
  OptionReplyHeader header;
  std::vector<std::byte> payload;
};

// Refusals a client may shrug off: the feature is simply not there.
bool declines(OptionReplyType type) {
  switch (type) {
    case OptionReplyType::err_unsup:
    case OptionReplyType::err_policy:
    case OptionReplyType::err_invalid:
    case OptionReplyType::err_platform: return true;
    default: return false;
  }
}

class ClientHandshake {
 public:
  ClientHandshake(std::unique_ptr<Stream> stream, const ClientOptions& options)
      : stream_(std::move(stream)), options_(options), peer_(stream_->peer()) {}

  awaitable<Result<Negotiated>> run() {
    Status status = co_await greet();
    if (status && style_ != Style::fixed_newstyle) {
      // An old server: no options at all (oldstyle) or none beyond EXPORT_NAME
      // (newstyle without the fixed flag, which drops the connection on anything else).
      if (options_.tls && !stream_->is_tls())
        status = fail(std::errc::not_supported,
                      "the NBD server at " + peer_ + " speaks " +
                          (style_ == Style::oldstyle ? "oldstyle" : "newstyle without the fixed extension") +
                          " negotiation, which has no STARTTLS; TLS is required by the URI");
      else if (style_ == Style::newstyle)
        status = co_await export_name();
      facts_.tls = stream_->is_tls();
    } else {
      if (status && options_.tls && !stream_->is_tls()) status = co_await start_tls();
      if (status) {
        facts_.tls = stream_->is_tls();
        if (options_.structured_replies) status = co_await ask_structured_replies();
      }
      if (status && facts_.structured_replies && options_.allocation_map) status = co_await ask_allocation_map();
      if (status) status = co_await go();
    }
    if (!status) {
      Error error = std::move(status.error());
      // With TLS 1.3 a server judges our certificate after the handshake has completed
      // on our side: its refusal shows up as the session ending at the first option.
      if (upgraded_ && replies_after_tls_ == 0 && error.code != std::errc::protocol_error)
        error.message = "the TLS session with " + peer_ +
                        " ended right after the handshake (the server may require a client certificate "
                        "that it can verify): " + error.message;
      co_await abandon();
      co_return tl::unexpected(std::move(error));
    }
    co_return Negotiated{std::move(stream_), std::move(facts_)};
  }

 private:
  // Reads the greeting and answers it. Old servers are still served: oldstyle (what
  // xen-api's own NBD client also accepts: the export is described at once) and
  // newstyle without the fixed extension (EXPORT_NAME only).
  awaitable<Status> greet() {
    std::array<std::byte, greeting_size> greeting{};
    auto first = std::span(greeting).first<oldstyle_prefix_size>();
    auto no_greeting = [&](const Error& e) {
      return fail(e.code, "no NBD greeting from " + peer_ + ": " + e.message);
    };
    if (Status s = co_await stream_->read_exactly(first); !s) co_return no_greeting(s.error());
    if (is_oldstyle_greeting(first)) {
      style_ = Style::oldstyle;
      std::array<std::byte, oldstyle_body_size> body{};
      if (Status s = co_await stream_->read_exactly(body); !s) co_return no_greeting(s.error());
      auto info = decode_oldstyle_body(body);
      if (!info) co_return tl::unexpected(info.error());
      facts_.size = info->size;
      facts_.flags = info->transmission_flags;
      facts_.export_name_fallback = true;
      co_return Status{};
    }
    if (Status s = co_await stream_->read_exactly(std::span(greeting).subspan(oldstyle_prefix_size)); !s)
      co_return no_greeting(s.error());
    auto flags = decode_greeting(greeting);
    if (!flags) co_return tl::unexpected(flags.error());
    style_ = (*flags & handshake_flag::fixed_newstyle) ? Style::fixed_newstyle : Style::newstyle;
    no_zeroes_ = (*flags & handshake_flag::no_zeroes) != 0;
    // Only flags the server offered: anything else makes it hang up.
    std::uint32_t client_flags = (style_ == Style::fixed_newstyle ? client_flag::fixed_newstyle : 0) |
                                 (no_zeroes_ ? client_flag::no_zeroes : 0);
    auto bytes = encode_client_flags(client_flags);
    Status sent = co_await stream_->send(Frame{{}, bytes});
    options_sent_ = sent.has_value() && style_ == Style::fixed_newstyle;
    co_return sent;
  }

  // Takes the encoded option by reference: callers keep it in a named object, as g++ 12
  // mishandles non-trivial temporaries that live across a co_await.
  // After a refusal the polite way out is ABORT (the server may answer it, or just
  // close); after a broken stream, sending fails quietly.
  awaitable<void> abandon() {
    if (stream_ && options_sent_) {
      const Result<std::vector<std::byte>> option = encode_option(Option::abort);
      co_await send_option(option);
    }
    if (stream_) co_await stream_->close();
  }

  awaitable<Status> send_option(const Result<std::vector<std::byte>>& bytes) {
    if (!bytes) co_return tl::unexpected(bytes.error());
    // Timed from before the send: the reply may be in before the send's completion is.
    option_sent_at_ = std::chrono::steady_clock::now();
    co_return co_await stream_->send(Frame{{}, *bytes});
  }

  // The first reply to an option timed against its sending; the quickest one stands
  // for the link (a server may take longer over GO, opening the export).
  void time_round_trip() {
    if (!option_sent_at_) return;
    auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                      *option_sent_at_);
    took = std::max(took, std::chrono::microseconds{1});
    if (facts_.round_trip.count() == 0 || took < facts_.round_trip) facts_.round_trip = took;
    option_sent_at_.reset();
  }

  awaitable<Result<OptionReply>> read_reply(Option option) {
    std::array<std::byte, option_reply_header_size> head{};
    auto lost = [&](const Error& e) {
      return fail(e.code, "NBD handshake with " + peer_ + " broke off waiting for the reply to " +
                              to_string(option) + ": " + e.message);
    };
    if (Status s = co_await stream_->read_exactly(head); !s) co_return lost(s.error());
    time_round_trip();
    auto header = decode_option_reply_header(head, option);
    if (!header) co_return tl::unexpected(header.error());
    OptionReply reply{*header, std::vector<std::byte>(header->length)};
    if (!reply.payload.empty()) {
      if (Status s = co_await stream_->read_exactly(reply.payload); !s) co_return lost(s.error());
    }
    if (upgraded_) ++replies_after_tls_;
    co_return reply;
  }

  // An option refusal as an Error, with a hint where the remedy is on our side.
  Error refusal(Option option, const OptionReply& reply) const {
    Error error = option_error(option, reply.header.type, reply.payload, options_.export_name);
    error.message = "NBD server at " + peer_ + ": " + error.message;
    if (reply.header.type == OptionReplyType::err_tls_reqd)
      error.message += " (the server requires TLS: use an nbds:// URI with credentials)";
    return error;
  }

  awaitable<Status> start_tls() {
    if (!options_.tls_context)
      co_return fail(std::errc::invalid_argument, "TLS was asked for without TLS settings");
    auto* plain = dynamic_cast<SocketStream*>(stream_.get());
    if (plain == nullptr)
      co_return fail(std::errc::not_supported, "cannot start TLS on this kind of stream to " + peer_);
    const Result<std::vector<std::byte>> starttls = encode_option(Option::starttls);
    if (Status s = co_await send_option(starttls); !s) co_return s;
    auto reply = co_await read_reply(Option::starttls);
    if (!reply) co_return tl::unexpected(reply.error());
    if (is_error(reply->header.type)) {
      Error error = refusal(Option::starttls, *reply);
      error.message += " (TLS is required by the URI, so the connection is not used without it)";
      co_return tl::unexpected(std::move(error));
    }
    if (reply->header.type != OptionReplyType::ack)
      co_return fail(std::errc::protocol_error, "NBD server at " + peer_ + " answered STARTTLS with " +
                                                    to_string(reply->header.type));
    Socket socket = plain->release_socket();
    stream_.reset();
    auto tls = co_await TlsStream::handshake(options_.tls_context, std::move(socket), options_.stream,
                                             options_.tls_hostname);
    if (!tls) co_return tl::unexpected(tls.error());
    stream_ = std::move(*tls);
    upgraded_ = true;
    co_return Status{};
  }

  awaitable<Status> ask_structured_replies() {
    const Result<std::vector<std::byte>> option = encode_option(Option::structured_reply);
    if (Status s = co_await send_option(option); !s) co_return s;
    auto reply = co_await read_reply(Option::structured_reply);
    if (!reply) co_return tl::unexpected(reply.error());
    if (reply->header.type == OptionReplyType::ack) {
      facts_.structured_replies = true;
      co_return Status{};
    }
    if (is_error(reply->header.type) && declines(reply->header.type)) co_return Status{};
    if (is_error(reply->header.type)) co_return tl::unexpected(refusal(Option::structured_reply, *reply));
    co_return fail(std::errc::protocol_error, "NBD server at " + peer_ + " answered STRUCTURED_REPLY with " +
                                                  to_string(reply->header.type));
  }

  awaitable<Status> ask_allocation_map() {
    const std::string queries[] = {std::string(base_allocation_context)};
    const auto option = encode_meta_context_option(Option::set_meta_context, options_.export_name, queries);
    if (Status s = co_await send_option(option); !s) co_return s;
    for (;;) {
      auto reply = co_await read_reply(Option::set_meta_context);
      if (!reply) co_return tl::unexpected(reply.error());
      const OptionReplyType type = reply->header.type;
      if (type == OptionReplyType::ack) co_return Status{};
      if (type == OptionReplyType::meta_context) {
        auto context = decode_meta_context_reply(reply->payload);
        if (!context) co_return tl::unexpected(context.error());
        if (context->name == base_allocation_context) facts_.allocation_context = context->id;
        continue;
      }
      // Without the map every byte is read; GO will report an unknown export properly.
      if (is_error(type) && type != OptionReplyType::err_tls_reqd) {
        facts_.allocation_context.reset();
        co_return Status{};
      }
      if (is_error(type)) co_return tl::unexpected(refusal(Option::set_meta_context, *reply));
      co_return fail(std::errc::protocol_error,
                     "NBD server at " + peer_ + " answered SET_META_CONTEXT with " + to_string(type));
    }
  }

  awaitable<Status> go() {
    const InfoType wanted[] = {InfoType::block_size, InfoType::name, InfoType::description};
    const auto option = encode_info_option(Option::go, options_.export_name, wanted);
    if (Status s = co_await send_option(option); !s) co_return s;
    facts_.name = options_.export_name;
    bool have_export = false;
    for (;;) {
      auto reply = co_await read_reply(Option::go);
      if (!reply) co_return tl::unexpected(reply.error());
      const OptionReplyType type = reply->header.type;
      if (type == OptionReplyType::info) {
        auto info = decode_info_reply(reply->payload);
        if (!info) co_return tl::unexpected(info.error());
        if (auto* e = std::get_if<ExportInfo>(&*info)) {
          facts_.size = e->size;
          facts_.flags = e->transmission_flags;
          have_export = true;
        } else if (auto* n = std::get_if<ExportName>(&*info)) {
          facts_.name = n->name;
        } else if (auto* d = std::get_if<ExportDescription>(&*info)) {
          facts_.description = d->description;
        } else if (auto* b = std::get_if<BlockSizes>(&*info)) {
          if (Status valid = validate_block_sizes(*b); !valid)
            co_return fail(std::errc::protocol_error,
                           "NBD server at " + peer_ + " advertised " + valid.error().message);
          facts_.block_sizes = *b;
          facts_.block_sizes_advertised = true;
        }
        continue;
      }
      if (type == OptionReplyType::ack) {
        if (!have_export)
          co_return fail(std::errc::protocol_error,
                         "NBD server at " + peer_ + " finished GO without the export's size (NBD_INFO_EXPORT)");
        co_return Status{};
      }
      if (type == OptionReplyType::err_unsup) co_return co_await export_name();
      if (is_error(type)) co_return tl::unexpected(refusal(Option::go, *reply));
      co_return fail(std::errc::protocol_error,
                     "NBD server at " + peer_ + " answered GO with " + to_string(type));
    }
  }

  // The old way in (GO not understood, or a newstyle server without the fixed
  // extension): no error replies, no block sizes. A server that does not have the
  // export can only hang up.
  awaitable<Status> export_name() {
    facts_.export_name_fallback = true;
    facts_.block_sizes = NegotiatedExport{}.block_sizes;
    facts_.block_sizes_advertised = false;
    const auto option = encode_export_name_option(options_.export_name);
    if (Status s = co_await send_option(option); !s) co_return s;
    std::vector<std::byte> reply(export_name_reply_size + (no_zeroes_ ? 0 : export_name_reply_padding));
    if (Status s = co_await stream_->read_exactly(reply); !s)
      co_return fail(std::errc::no_such_file_or_directory,
                     "NBD server at " + peer_ + " hung up after EXPORT_NAME '" + options_.export_name +
                         "' (without GO it cannot say why; most likely there is no such export): " +
                         s.error().message);
    time_round_trip();
    auto info = decode_export_name_reply(reply);
    if (!info) co_return tl::unexpected(info.error());
    facts_.size = info->size;
    facts_.flags = info->transmission_flags;
    co_return Status{};
  }

  std::unique_ptr<Stream> stream_;
  const ClientOptions& options_;
  std::string peer_;
  NegotiatedExport facts_;
  enum class Style { oldstyle, newstyle, fixed_newstyle };
  Style style_ = Style::fixed_newstyle;
  bool no_zeroes_ = false;
  bool options_sent_ = false;  // the server is in option haggling: ABORT is understood
  bool upgraded_ = false;      // STARTTLS succeeded
  int replies_after_tls_ = 0;
  std::optional<std::chrono::steady_clock::time_point> option_sent_at_;
};

}  // namespace

awaitable<Result<Negotiated>> negotiate(std::unique_ptr<Stream> stream, const ClientOptions& options) {
  ClientHandshake handshake(std::move(stream), options);
  co_return co_await handshake.run();
}

}  // namespace sluice::nbd
