#include "apps/libsluice/receiver.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <set>
#include <thread>

#include "apps/libsluice/receive_service.hpp"
#include "engine/loop_threads.hpp"
#include "engine/net/address.hpp"
#include "engine/net/server_loop.hpp"
#include "engine/net/socket_file_remover.hpp"
#include "engine/net/tls_context.hpp"

namespace sluice {

namespace {

constexpr std::size_t default_max_connections = 16;
constexpr std::size_t default_max_handshakes = 64;

Status refuse(std::string message) { return fail(std::errc::invalid_argument, std::move(message)); }

bool has_credentials(const TlsOptions& tls) { return !tls.certificate.empty() || !tls.psk_file.empty(); }

// Whatever adjusts TLS without saying who we are (certificate or PSK).
bool tls_tuning_given(TlsOptions tls) {
  tls.certificate.clear();
  tls.psk_file.clear();
  return tls != TlsOptions{};
}

// An option the chosen protocol has no use for is refused rather than ignored: a
// --size or --tls-ca that silently does nothing leaves the operator believing in a
// check or an encryption that is not there.
Status check_nbd(const ReceiverOptions& o) {
  if (o.exports.empty()) return refuse("--protocol nbd needs at least one --export NAME=PATH");
  if (!o.output.empty() || o.http) return refuse("--output and --http are for chunked and raw");
  if (o.size) return refuse("--size is for chunked and raw: an NBD export has its file's size");
  std::set<std::string> names;
  for (const ExportSpec& spec : o.exports) {
    if (spec.path.empty()) return refuse("--export '" + spec.name + "' has no path");
    if (!names.insert(spec.name).second) return refuse("--export: the name '" + spec.name + "' is used twice");
  }
  if (!o.tls_mode.empty() && o.tls_mode != "require" && o.tls_mode != "off")
    return refuse("--tls must be require or off");
  if (o.tls_mode == "require" && !has_credentials(o.tls))
    return refuse("--tls=require needs --tls-cert and --tls-key, or --tls-psk-file");
  if (!has_credentials(o.tls) && tls_tuning_given(o.tls))
    return refuse("--tls-key, --tls-ca, --tls-ciphers, --tls-ciphersuites and --tls12 shape TLS, which needs "
                  "--tls-cert or --tls-psk-file");
  return Status{};
}

Status check_stream(ReceiverOptions& o) {
  if (o.output.empty()) return refuse("--protocol " + o.protocol + " needs --output PATH");
  if (!o.http_paths.empty() && !o.http) return refuse("--http-path is for --http");
  if (!o.exports.empty()) return refuse("--export is for --protocol nbd");
  if (o.read_only) return refuse("--read-only is for --protocol nbd");
  if (!o.tls_mode.empty())
    return refuse("--tls=" + o.tls_mode + " is NBD's STARTTLS policy: chunked and raw are encrypted by "
                  "listening on tls://");
  if (o.output == null_output && o.direct) return refuse("--direct is for a file or block device, not null:");
  if (o.size && *o.size == 0) return refuse("--size must not be 0");
  if (o.output == null_output && !o.size)
    return refuse("--output null: keeps nothing and so has no size: give --size BYTES");
  // One image written by one connection at a time: more loops would only wait.
  if (o.threads > 1) return refuse("--threads is for --protocol nbd");
  o.threads = 1;
  // Two senders at once would interleave two images in one file: the second is
  // refused while the first is served.
  if (o.output != null_output) {
    if (o.max_connections > 1) return refuse("--max-connections: one sender at a time writes --output (chunked and raw)");
    o.max_connections = 1;
  }
  return Status{};
}

Status check_listener(const ReceiverOptions& o, const ListenUri& where) {
  if (o.protocol == "nbd") {
    if (where.tls)
      return refuse("NBD negotiates TLS itself (STARTTLS): listen on tcp:// with --tls-cert/--tls-key");
    return Status{};
  }
  if (!where.tls && o.tls != TlsOptions{})
    return refuse("the --tls-* options need a tls:// listener: " + o.listen + " is plaintext");
  if (where.tls && !has_credentials(o.tls))
    return refuse("a tls:// listener needs --tls-cert and --tls-key, or --tls-psk-file");
  return Status{};
}

// A URI a sender can use to reach what `acceptor` listens on.
std::string listening_uri(const ListenUri& where, const Acceptor& acceptor) {
  if (where.address.kind == NetAddress::Kind::unix_socket) return "unix://" + where.address.path;
  const std::string& host = where.address.host;
  const bool ipv6 = host.find(':') != std::string::npos;
  return std::string(where.tls ? "tls://" : "tcp://") + (ipv6 ? "[" + host + "]" : host) + ":" +
         std::to_string(bound_port(acceptor));
}

}  // namespace

// What the Receiver holds, in an order that tears it down safely: the services and the
// server, bound to the loops, go before the loops that run them.
struct Receiver::State {
  explicit State(ReceiverOptions o) : options(std::move(o)), extra_loops(options.threads - 1) {}

  ReceiverOptions options;
  ListenUri where;
  std::shared_ptr<TlsContext> listener_tls;  // tls:// listeners
  std::vector<UniqueFd> device_claims;       // NBD: writable block devices, claimed once
  LoopThreads extra_loops;
  std::vector<executor> loops;  // the caller's first
  std::vector<ReceiveService> services;  // one per loop
  std::unique_ptr<ServerLoop> server;    // from listen() on
  std::optional<SocketFileRemover> socket_file;
  // On the caller's loop:
  bool stop_requested = false;
  bool aborted = false;
};

Status Receiver::check(ReceiverOptions& o) {
  if (o.listen.empty()) return refuse("serve needs --listen URI");
  if (o.threads > ReceiverOptions::max_threads)
    return refuse("--threads must be between 1 and " + std::to_string(ReceiverOptions::max_threads));
  if (o.max_connections > ReceiverOptions::max_connections_limit)
    return refuse("--max-connections must be between 1 and " +
                  std::to_string(ReceiverOptions::max_connections_limit));
  if (o.max_handshakes > ReceiverOptions::max_connections_limit)
    return refuse("--max-handshakes must be between 1 and " + std::to_string(ReceiverOptions::max_connections_limit));
  Status fits;
  if (o.protocol == "nbd")
    fits = check_nbd(o);
  else if (o.protocol == "chunked" || o.protocol == "raw")
    fits = check_stream(o);
  else
    return refuse("--protocol must be chunked, raw or nbd");
  if (!fits) return fits;
  auto where = parse_listen_uri(o.listen);
  if (!where) return refuse("--listen: " + where.error().message);
  if (Status listener = check_listener(o, *where); !listener) return listener;
  if (o.max_connections == 0) o.max_connections = default_max_connections;
  if (o.max_handshakes == 0) o.max_handshakes = default_max_handshakes;
  if (o.threads == 0) o.threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  if (!o.tls.certificate.empty() && o.tls.private_key.empty()) o.tls.private_key = o.tls.certificate;
  return Status{};
}

Receiver::Receiver(executor ex, ReceiverOptions options)
    : ex_(std::move(ex)), state_(std::make_shared<State>(std::move(options))) {}

Receiver::~Receiver() {
  // Loop threads still running (no run(), or run() not finished) must stop before the
  // objects they serve go.
  state_->extra_loops.stop();
}

Result<std::unique_ptr<Receiver>> Receiver::create(executor ex, ReceiverOptions options) {
  if (Status ok = check(options); !ok) return tl::unexpected(ok.error());
  std::unique_ptr<Receiver> receiver(new Receiver(ex, std::move(options)));
  State& s = *receiver->state_;
  const ReceiverOptions& o = s.options;
  s.where = *parse_listen_uri(o.listen);  // check() parsed it
  if (s.where.tls) {
    auto tls = TlsContext::create(TlsRole::server, o.tls);
    if (!tls) return tl::unexpected(tls.error());
    // Chunked and raw are one-way: a client never reads TLS 1.3 session tickets, and
    // unread bytes make its close a reset that can cut off the end of the stream.
    SSL_CTX_set_num_tickets((*tls)->native(), 0);
    s.listener_tls = *tls;
  }
  if (o.protocol == "nbd") {
    auto claims = claim_export_devices(o);
    if (!claims) return tl::unexpected(claims.error());
    s.device_claims = std::move(*claims);
  }
  // Each further loop has its own service (its own open exports), so connections share
  // nothing across threads but the claims on block devices (a duplicate of the claim
  // is each loop's descriptor of the device).
  s.loops.push_back(ex);
  for (std::size_t i = 0; i < s.extra_loops.size(); ++i) s.loops.push_back(s.extra_loops.at(i));
  for (const executor& loop : s.loops) {
    auto service = o.protocol == "nbd" ? make_nbd_export_service(loop, o, s.device_claims)
                                       : make_stream_receive_service(loop, o);
    if (!service) return tl::unexpected(service.error());
    s.services.push_back(std::move(*service));
  }
  return receiver;
}

Status Receiver::listen() {
  State& s = *state_;
  if (s.server) return Status{};
  auto acceptor = listen_on(ex_, s.where.address);
  if (!acceptor) return tl::unexpected(acceptor.error());
  if (s.where.address.kind == NetAddress::Kind::unix_socket) s.socket_file.emplace(s.where.address.path);
  address_ = listening_uri(s.where, *acceptor);

  ServerLoopOptions loop_options;
  loop_options.once = s.options.once;
  loop_options.max_connections = s.options.max_connections;
  loop_options.max_handshakes = s.options.max_handshakes;
  loop_options.handlers_negotiate = s.services.front().negotiates;
  loop_options.refuse = s.services.front().refuse;
  loop_options.stream = s.options.stream;
  loop_options.handshake_timeout = s.options.handshake_timeout;
  loop_options.tls = s.listener_tls;
  loop_options.report = s.options.connection_failed;
  if (!loop_options.report) loop_options.report = [](const Error&) {};
  std::vector<ServerWorker> workers;
  for (std::size_t i = 0; i < s.loops.size(); ++i)
    workers.push_back(ServerWorker{s.loops[i], std::move(s.services[i].handler)});
  s.server = std::make_unique<ServerLoop>(std::move(*acceptor), std::move(workers), std::move(loop_options));
  s.extra_loops.start();
  return Status{};
}

awaitable<Status> Receiver::run() {
  if (ran_.exchange(true)) co_return fail(std::errc::operation_not_permitted, "this receiver has already run");
  if (Status listening = listen(); !listening) co_return listening;
  State& s = *state_;
  if (s.stop_requested) s.server->stop();
  Status result;
  try {
    result = co_await s.server->run();
  } catch (const std::exception& e) {
    result = fail(std::errc::io_error, std::string("internal error in the receiver: ") + e.what());
  }
  s.extra_loops.stop();
  if (result && s.aborted)
    result = fail(std::errc::interrupted, "aborted: the transfers in progress were cut short");
  co_return result;
}

// Posted to the caller's loop, which owns the server; a Receiver already gone by then
// leaves nothing to stop.
void Receiver::stop() {
  asio::post(ex_, [state = std::weak_ptr<State>(state_)] {
    if (auto s = state.lock()) stop_on_loop(*s);
  });
}

void Receiver::abort() {
  asio::post(ex_, [state = std::weak_ptr<State>(state_)] {
    if (auto s = state.lock()) abort_on_loop(*s);
  });
}

void Receiver::stop_on_loop(State& s) {
  if (s.stop_requested) return;
  s.stop_requested = true;
  if (s.server) s.server->stop();
  // Each service winds down on its own loop's thread.
  for (std::size_t i = 0; i < s.loops.size(); ++i) asio::post(s.loops[i], s.services[i].stop);
}

void Receiver::abort_on_loop(State& s) {
  stop_on_loop(s);
  if (!s.server || s.server->active() == 0) return;
  for (std::size_t i = 0; i < s.loops.size(); ++i) {
    if (!s.services[i].abort) continue;
    s.aborted = true;
    asio::post(s.loops[i], s.services[i].abort);
  }
}

std::size_t Receiver::active() const { return state_->server ? state_->server->active() : 0; }

Status receive_blocking(ReceiverOptions options, const std::function<void(Receiver&)>& listening) {
  try {
    asio::io_context context(1);
    auto receiver = Receiver::create(context.get_executor(), std::move(options));
    if (!receiver) return tl::unexpected(receiver.error());
    if (Status bound = (*receiver)->listen(); !bound) return bound;
    if (listening) listening(**receiver);
    std::optional<Status> result;
    asio::co_spawn(context, (*receiver)->run(), [&](std::exception_ptr error, Status status) {
      result = error ? fail(std::errc::io_error, "internal error in the receiver") : std::move(status);
    });
    context.run();
    if (!result) return fail(std::errc::io_error, "the receiver did not finish");
    return *result;
  } catch (const std::exception& e) {
    return fail(std::errc::io_error, std::string("internal error in the receiver: ") + e.what());
  }
}

}  // namespace sluice
