#include "protocols/nbd/server/handshake.hpp"

#include <array>
#include <string>
#include <vector>

#include "engine/net/socket_stream.hpp"
#include "engine/net/tls_stream.hpp"
#include "engine/printable.hpp"
#include "protocols/nbd/handshake_messages.hpp"

namespace sluice::nbd {

namespace {

constexpr std::uint32_t allocation_id = 1;

// One connection's negotiation state; STARTTLS resets what it must forget.
struct State {
  std::unique_ptr<Stream>& stream;
  const ServerConfig& config;
  ServingGate& gate;  // entered when the client chooses an export
  bool no_zeroes = false;
  bool structured_replies = false;
  bool allocation_selected = false;
  std::string allocation_export;  // the export name SET_META_CONTEXT was for
};

awaitable<Status> send(State& s, std::span<const std::byte> bytes) {
  co_return co_await s.stream->send(Frame{{}, bytes});
}

awaitable<Status> reply(State& s, Option option, OptionReplyType type, std::string_view message = {}) {
  std::vector<std::byte> bytes =
      is_error(type) ? encode_error_reply(option, type, message) : encode_ack(option);
  co_return co_await send(s, bytes);
}

// The next option header, or nothing when the client closed the connection between
// options (clients that only wanted to look often just go).
awaitable<Result<std::optional<OptionHeader>>> next_option(Stream& stream) {
  std::array<std::byte, option_header_size> header{};
  auto first = co_await stream.read_some(header);
  if (!first) co_return tl::unexpected(first.error());
  if (*first == 0) co_return std::nullopt;
  if (*first < header.size()) {
    if (Status rest = co_await stream.read_exactly(std::span(header).subspan(*first)); !rest)
      co_return tl::unexpected(rest.error());
  }
  auto decoded = decode_option_header(header);
  if (!decoded) co_return tl::unexpected(decoded.error());
  co_return *decoded;
}

bool wants(const InfoRequest& request, InfoType type) {
  for (InfoType t : request.requests)
    if (t == type) return true;
  return false;
}

awaitable<Status> answer_info(State& s, Option option, const ServerExport& e, const InfoRequest& request,
                              std::uint16_t flags) {
  if (Status sent = co_await send(s, encode_info_export(option, e.image->size(), flags)); !sent) co_return sent;
  if (wants(request, InfoType::name)) {
    auto name = encode_info_name(option, e.name);
    if (name) {
      if (Status sent = co_await send(s, *name); !sent) co_return sent;
    }
  }
  if (wants(request, InfoType::description) && !e.description.empty()) {
    auto description = encode_info_description(option, e.description);
    if (description) {
      if (Status sent = co_await send(s, *description); !sent) co_return sent;
    }
  }
  // Sent whether asked or not (the spec allows it): a client that did not ask may
  // still use it, and one that asked has promised to obey it.
  if (Status sent = co_await send(s, encode_info_block_size(option, e.image->traits().block_sizes)); !sent)
    co_return sent;
  co_return co_await reply(s, option, OptionReplyType::ack);
}

// Which of the queries name base:allocation ("base:" lists every base context).
bool selects_allocation(const MetaContextRequest& request, bool listing) {
  if (listing && request.queries.empty()) return true;
  for (const std::string& q : request.queries) {
    if (q == base_allocation_context) return true;
    if (listing && q == "base:") return true;
  }
  return false;
}

awaitable<Status> answer_meta_context(State& s, Option option, std::span<const std::byte> data) {
  const bool listing = option == Option::list_meta_context;
  if (!listing) s.allocation_selected = false;  // SET replaces the selection, even when it fails
  if (!s.structured_replies)
    co_return co_await reply(s, option, OptionReplyType::err_invalid,
                             "metadata contexts need structured replies (STRUCTURED_REPLY) first");
  auto request = decode_meta_context_option(data);
  if (!request) co_return co_await reply(s, option, OptionReplyType::err_invalid, request.error().message);
  if (!find_export(s.config, request->export_name))
    co_return co_await reply(s, option, OptionReplyType::err_unknown,
                             "no export named '" + printable(request->export_name) + "'");
  if (selects_allocation(*request, listing)) {
    auto context = encode_meta_context_reply(option, listing ? 0 : allocation_id, base_allocation_context);
    if (Status sent = co_await send(s, *context); !sent) co_return sent;
    if (!listing) {
      s.allocation_selected = true;
      s.allocation_export = request->export_name;
    }
  }
  co_return co_await reply(s, option, OptionReplyType::ack);
}

awaitable<Result<bool>> start_tls(State& s, const OptionHeader& header) {
  if (!s.config.tls) {
    if (Status r = co_await reply(s, header.option, OptionReplyType::err_policy, "this server does not offer TLS");
        !r)
      co_return tl::unexpected(r.error());
    co_return false;
  }
  if (s.stream->is_tls()) {
    if (Status r = co_await reply(s, header.option, OptionReplyType::err_invalid, "TLS is already on"); !r)
      co_return tl::unexpected(r.error());
    co_return false;
  }
  if (header.length != 0) {
    if (Status r = co_await reply(s, header.option, OptionReplyType::err_invalid, "STARTTLS takes no data"); !r)
      co_return tl::unexpected(r.error());
    co_return false;
  }
  auto* plain = dynamic_cast<SocketStream*>(s.stream.get());
  if (plain == nullptr) {
    if (Status r = co_await reply(s, header.option, OptionReplyType::err_platform,
                                  "this connection cannot be upgraded to TLS");
        !r)
      co_return tl::unexpected(r.error());
    co_return false;
  }
  if (Status r = co_await reply(s, header.option, OptionReplyType::ack); !r) co_return tl::unexpected(r.error());
  auto tls = co_await TlsStream::handshake(s.config.tls, plain->release_socket(), s.config.stream);
  if (!tls) co_return fail(tls.error().code, "after STARTTLS: " + tls.error().message);
  s.stream = std::move(*tls);
  // The spec: nothing negotiated before STARTTLS survives it.
  s.structured_replies = false;
  s.allocation_selected = false;
  s.allocation_export.clear();
  co_return true;
}

Negotiated outcome(const State& s, const ServerExport& e, std::string_view requested_name) {
  Negotiated n;
  n.chosen = &e;
  n.structured_replies = s.structured_replies;
  n.flags = transmission_flags(e.image->traits(), s.structured_replies);
  n.allocation_context = s.structured_replies && s.allocation_selected && s.allocation_export == requested_name;
  n.allocation_context_id = allocation_id;
  return n;
}

}  // namespace

// g++ 12 at -O2 inlines the small coroutines' ramps into these and then mistakes
// Asio's frame allocator for a mismatch with the frame's operator delete (as in
// transfer.cpp); ASan builds check the real pairing at run time, clang does not warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {

// What one option led to: more haggling, the end of the session, or an export.
struct Step {
  bool ended = false;
  std::optional<Negotiated> chosen;
};

awaitable<Result<Step>> handle_option(State& s, const OptionHeader& header, std::span<const std::byte> data) {
  const Option option = header.option;
  const ServerConfig& config = s.config;
  Status status;
  if (config.tls_required && !s.stream->is_tls() && option != Option::starttls && option != Option::abort) {
    if (option == Option::export_name)
      co_return fail(std::errc::permission_denied, "client chose an export with EXPORT_NAME before STARTTLS");
    status = co_await reply(s, option, OptionReplyType::err_tls_reqd, "this server requires TLS: send STARTTLS first");
    if (!status) co_return tl::unexpected(status.error());
    co_return Step{};
  }

  switch (option) {
    case Option::export_name: {
      auto name = decode_export_name_option(data);
      if (!name) co_return tl::unexpected(name.error());
      const ServerExport* e = find_export(config, *name);
      if (e == nullptr)  // EXPORT_NAME cannot be refused: the spec says to disconnect
        co_return fail(std::errc::no_such_file_or_directory, "client asked for unknown export '" + *name + "'");
      // Nor can a full server say so here: it hangs up (the refusal is reported).
      if (!co_await s.gate.enter()) co_return Step{true, std::nullopt};
      Negotiated n = outcome(s, *e, *name);
      auto bytes = encode_export_name_reply(ExportInfo{e->image->size(), n.flags}, s.no_zeroes);
      if (Status sent = co_await send(s, bytes); !sent) co_return tl::unexpected(sent.error());
      co_return Step{false, n};
    }
    case Option::abort:
      // The client may already be gone; the session is over either way.
      (void)co_await reply(s, option, OptionReplyType::ack);
      co_return Step{true, std::nullopt};
    case Option::list:
      if (!check_no_option_data(header)) {
        status = co_await reply(s, option, OptionReplyType::err_invalid, "LIST takes no data");
        break;
      }
      for (const ServerExport& e : config.exports) {
        auto entry = encode_server_reply(e.name, e.description);
        if (!entry) continue;
        if (status = co_await send(s, *entry); !status) break;
      }
      if (status) status = co_await reply(s, option, OptionReplyType::ack);
      break;
    case Option::starttls: {
      auto started = co_await start_tls(s, header);
      if (!started) co_return tl::unexpected(started.error());
      co_return Step{};
    }
    case Option::info:
    case Option::go: {
      auto request = decode_info_option(data);
      if (!request) {
        status = co_await reply(s, option, OptionReplyType::err_invalid, request.error().message);
        break;
      }
      const ServerExport* e = find_export(config, request->export_name);
      if (e == nullptr) {
        // The name as UTF-8, which the spec asks of error strings; a client may send any bytes.
        status = co_await reply(s, option, OptionReplyType::err_unknown,
                                "no export named '" + printable(request->export_name) + "'");
        break;
      }
      if (option == Option::go) {
        // A full server says why; the client may try again or go.
        if (Status in = co_await s.gate.enter(); !in) {
          status = co_await reply(s, option, OptionReplyType::err_policy, in.error().message);
          break;
        }
      }
      Negotiated n = outcome(s, *e, request->export_name);
      status = co_await answer_info(s, option, *e, *request, n.flags);
      if (!status) co_return tl::unexpected(status.error());
      if (option == Option::go) co_return Step{false, n};
      break;
    }
    case Option::structured_reply:
      if (!data.empty()) {
        status = co_await reply(s, option, OptionReplyType::err_invalid, "STRUCTURED_REPLY takes no data");
      } else if (s.structured_replies) {
        status = co_await reply(s, option, OptionReplyType::err_invalid, "structured replies are already on");
      } else {
        s.structured_replies = true;
        status = co_await reply(s, option, OptionReplyType::ack);
      }
      break;
    case Option::list_meta_context:
    case Option::set_meta_context: status = co_await answer_meta_context(s, option, data); break;
    default:
      status = co_await reply(s, option, OptionReplyType::err_unsup, to_string(option) + " is not supported");
      break;
  }
  if (!status) co_return tl::unexpected(status.error());
  co_return Step{};
}

}  // namespace

awaitable<Result<std::optional<Negotiated>>> negotiate(std::unique_ptr<Stream>& stream,
                                                      const ServerConfig& config, ServingGate& gate) {
  State s{stream, config, gate, false, false, false, {}};
  const std::uint16_t offered = handshake_flag::fixed_newstyle | handshake_flag::no_zeroes;
  if (Status sent = co_await send(s, encode_greeting(offered)); !sent) co_return tl::unexpected(sent.error());
  std::array<std::byte, client_flags_size> client_flags{};
  // A client that connects and goes without a word (a health check, a port probe)
  // has ended its session, not failed it.
  auto first = co_await stream->read_some(client_flags);
  if (!first) co_return tl::unexpected(first.error());
  if (*first == 0) co_return std::nullopt;
  if (*first < client_flags.size()) {
    if (Status got = co_await stream->read_exactly(std::span(client_flags).subspan(*first)); !got)
      co_return tl::unexpected(got.error());
  }
  auto flags = decode_client_flags(client_flags, offered);
  if (!flags) co_return tl::unexpected(flags.error());  // the spec: drop the connection
  s.no_zeroes = (*flags & client_flag::no_zeroes) != 0;

  std::vector<std::byte> data;
  for (;;) {
    auto header = co_await next_option(*stream);
    if (!header) co_return tl::unexpected(header.error());
    if (!*header) co_return std::nullopt;
    data.resize((*header)->length);
    if (Status got = co_await stream->read_exactly(data); !got) co_return tl::unexpected(got.error());
    auto step = co_await handle_option(s, **header, data);
    if (!step) co_return tl::unexpected(step.error());
    if (step->ended) co_return std::nullopt;
    if (step->chosen) co_return step->chosen;
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace sluice::nbd
