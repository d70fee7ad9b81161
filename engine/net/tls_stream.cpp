#include "engine/net/tls_stream.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "engine/net/hard_close.hpp"
#include "engine/net/tcp_info.hpp"

namespace sluice {

namespace {

constexpr std::size_t max_record_plaintext = 16384;
constexpr std::size_t receive_buffer = 256 * 1024;

// One BIO method for every stream: immutable after creation, so sharing it carries
// no state between transfers.
BIO_METHOD* stream_bio_method(int (*write)(BIO*, const char*, std::size_t, std::size_t*),
                              int (*read)(BIO*, char*, std::size_t, std::size_t*),
                              long (*ctrl)(BIO*, int, long, void*)) {
  static BIO_METHOD* method = [&] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice stream");
    BIO_meth_set_write_ex(m, write);
    BIO_meth_set_read_ex(m, read);
    BIO_meth_set_ctrl(m, ctrl);
    BIO_meth_set_create(m, [](BIO* bio) {
      BIO_set_init(bio, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

// Why a peer may end a handshake without saying why: what it may have refused is what
// we offered, a certificate or a pre-shared key.
std::string refusal_guess(const TlsOptions& ours) {
  if (!ours.psk_file.empty() && ours.certificate.empty())
    return "may not know our pre-shared key, identity or key (--tls-psk-file), or does not speak TLS";
  if (!ours.psk_file.empty()) return "may have refused our certificate or pre-shared key, or does not speak TLS";
  return "may have refused our certificate or does not speak TLS";
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

TlsStream::TlsStream(std::shared_ptr<TlsContext> context, Socket socket, StreamOptions options)
    : context_(std::move(context)),
      socket_(std::move(socket)),
      options_(options),
      cork_(socket_.native_handle()),
      peer_(describe_peer(socket_)),
      in_(receive_buffer) {
  apply_socket_options(socket_, options_);
  ssl_ = SSL_new(context_->native());
  BIO* bio = BIO_new(stream_bio_method(&TlsStream::bio_write, &TlsStream::bio_read, &TlsStream::bio_ctrl));
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);
  SSL_set_app_data(ssl_, &client_write_secret_);  // TlsContext's key-log callback fills it
  SSL_set_msg_callback(ssl_, &TlsStream::message_callback);
  SSL_set_msg_callback_arg(ssl_, this);
  out_.reserve(options_.batch_bytes + 64 * 1024);
  sending_.reserve(options_.batch_bytes + 64 * 1024);
}

TlsStream::~TlsStream() {
  OPENSSL_cleanse(client_write_secret_.data(), client_write_secret_.size());
  SSL_free(ssl_);
  asio::error_code ignored;
  socket_.close(ignored);
}

int TlsStream::bio_write(BIO* bio, const char* data, std::size_t length, std::size_t* written) {
  auto* self = static_cast<TlsStream*>(BIO_get_data(bio));
  // Once the stream seals its own records, OpenSSL's write sequence is stale: whatever
  // it writes now (an alert on a failing read, its answer to a KeyUpdate) would reuse a
  // nonce of ours, so it never leaves. The sealer answers KeyUpdates and sends
  // close_notify itself.
  if (self->sealer_) {
    *written = length;
    return 1;
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  self->out_.insert(self->out_.end(), bytes, bytes + length);
  *written = length;
  return 1;
}

int TlsStream::bio_read(BIO* bio, char* data, std::size_t length, std::size_t* read) {
  auto* self = static_cast<TlsStream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  std::size_t available = self->in_end_ - self->in_begin_;
  if (available == 0) {
    if (!self->peer_closed_) BIO_set_retry_read(bio);  // wait for more, unless it ended
    *read = 0;
    return 0;
  }
  std::size_t n = std::min(length, available);
  std::memcpy(data, self->in_.data() + self->in_begin_, n);
  self->in_begin_ += n;
  *read = n;
  return 1;
}

long TlsStream::bio_ctrl(BIO* bio, int command, long, void*) {
  auto* self = static_cast<TlsStream*>(BIO_get_data(bio));
  switch (command) {
    case BIO_CTRL_FLUSH: return 1;  // flushing is ours to schedule
    case BIO_CTRL_PENDING: return static_cast<long>(self->in_end_ - self->in_begin_);
    case BIO_CTRL_WPENDING: return 0;
    default: return 0;
  }
}

void TlsStream::message_callback(int write_p, int, int content_type, const void* buf, std::size_t len, SSL*,
                                 void* arg) {
  auto* self = static_cast<TlsStream*>(arg);
  const auto* bytes = static_cast<const unsigned char*>(buf);
  // A KeyUpdate from the peer that asks for ours (RFC 8446 4.6.3): the sealer sends it.
  if (!write_p && content_type == SSL3_RT_HANDSHAKE && len >= 5 && bytes[0] == SSL3_MT_KEY_UPDATE &&
      bytes[4] == SSL_KEY_UPDATE_REQUESTED && self->sealer_)
    self->sealer_->peer_requested_update();
  if (!write_p || content_type != SSL3_RT_HEADER || len < 5 || self->sealer_) return;
  self->count_record(5 + (static_cast<std::size_t>(bytes[3]) << 8 | bytes[4]));
}

void TlsStream::count_record(std::size_t bytes) {
  ++stats_.tls_records;
  stats_.tls_record_bytes += bytes;
  if (record_observer_) record_observer_(bytes);
}

void TlsStream::adopt_record_layer() {
  // Only a TLS 1.3 client that has written nothing under its application key yet: its
  // record sequence is then 0, which is where the sealer starts. (A server has already
  // sent session tickets under its key, a number OpenSSL keeps to itself.)
  if (context_->role() == TlsRole::client && context_->options().own_records && SSL_version(ssl_) == TLS1_3_VERSION &&
      !client_write_secret_.empty())
    sealer_ = TlsRecordSealer::create(SSL_get_current_cipher(ssl_), client_write_secret_,
                                      context_->options().records_per_key);
  OPENSSL_cleanse(client_write_secret_.data(), client_write_secret_.size());
  client_write_secret_.clear();
}

awaitable<Result<std::unique_ptr<TlsStream>>> TlsStream::handshake(std::shared_ptr<TlsContext> context,
                                                                   Socket socket, StreamOptions options,
                                                                   std::string hostname) {
  std::unique_ptr<TlsStream> stream(new TlsStream(std::move(context), std::move(socket), options));
  if (Status s = co_await stream->run_handshake(hostname); !s) co_return tl::unexpected(s.error());
  co_return stream;
}

awaitable<Status> TlsStream::run_handshake(const std::string& hostname) {
  if (context_->role() == TlsRole::client) {
    SSL_set_connect_state(ssl_);
    if (!hostname.empty()) {
      if (!is_ip_address(hostname)) SSL_set_tlsext_host_name(ssl_, hostname.c_str());
      if (context_->options().verify_peer) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
        if (is_ip_address(hostname))
          X509_VERIFY_PARAM_set1_ip_asc(param, hostname.c_str());
        else
          SSL_set1_host(ssl_, hostname.c_str());
      }
    }
  } else {
    SSL_set_accept_state(ssl_);
  }
  for (;;) {
    ERR_clear_error();
    int ret = SSL_do_handshake(ssl_);
    if (!out_.empty()) {
      if (Status s = co_await flush(false); !s) co_return s;
    }
    if (ret == 1) {
      stats_.tls_cipher = cipher();  // fixed from here on
      adopt_record_layer();
      co_return Status{};
    }
    int error = SSL_get_error(ssl_, ret);
    if (error == SSL_ERROR_WANT_READ) {
      if (Status s = co_await receive_ciphertext(); !s)
        co_return fail(s.error().code, "TLS handshake with " + peer_ + " failed: " + s.error().message + " (the peer " +
                                           refusal_guess(context_->options()) + ")");
      if (peer_closed_ && in_begin_ == in_end_)
        co_return fail(std::errc::connection_reset, "TLS handshake with " + peer_ +
                                                        " failed: the peer closed the connection (it " +
                                                        refusal_guess(context_->options()) + ")");
      continue;
    }
    co_return tl::unexpected(tls_error("TLS handshake with " + peer_, ret));
  }
}

Error TlsStream::tls_error(const std::string& what, int ret) {
  std::string message = what + " failed";
  // The verification result is recorded even when verification is off
  // (--tls-no-verify), and stays set after the handshake: blame the certificate only
  // where it was checked and the handshake is what failed.
  long verify = SSL_get_verify_result(ssl_);
  const bool verified = (SSL_get_verify_mode(ssl_) & SSL_VERIFY_PEER) != 0;
  if (verify != X509_V_OK && verified && !SSL_is_init_finished(ssl_) && context_->role() == TlsRole::client) {
    message += ": certificate verification failed: ";
    message += X509_verify_cert_error_string(verify);
  }
  // Bytes that are not TLS records where the peer's first ones belong: it speaks
  // something else (a plaintext listener answering in its own protocol).
  const int reason = ERR_GET_REASON(ERR_peek_error());
  const bool not_tls = !SSL_is_init_finished(ssl_) &&
                       (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
                        reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST);
  // OpenSSL's words for a handshake the two ends could not agree on name the alert,
  // not the options that would make them agree.
  const bool nothing_shared = !SSL_is_init_finished(ssl_) && ERR_GET_LIB(ERR_peek_error()) == ERR_LIB_SSL &&
                              (reason == SSL_R_NO_SHARED_CIPHER || reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
                               reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION ||
                               reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_NO_PROTOCOLS_AVAILABLE);
  const bool alert_received = reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE;
  // With pre-shared keys alone, how each end says the keys did not match: a server
  // finds the binder wrong (same identity, another key) or, for an identity it does
  // not know, falls back to a certificate it has not got; the client gets an alert.
  const TlsOptions& ours = context_->options();
  const bool psk_only = !ours.psk_file.empty() && ours.certificate.empty();
  const bool psk_refused = psk_only && !SSL_is_init_finished(ssl_) && ERR_GET_LIB(ERR_peek_error()) == ERR_LIB_SSL &&
                           (reason == SSL_R_BINDER_DOES_NOT_VERIFY || reason == SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM ||
                            reason == SSL_R_NO_SHARED_CIPHER || reason == SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER ||
                            reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR || reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE);
  std::string detail = openssl_errors();
  if (!detail.empty()) message += ": " + detail;
  else message += " (SSL error " + std::to_string(SSL_get_error(ssl_, ret)) + ")";
  if (psk_refused)
    message += context_->role() == TlsRole::client
                   ? " (the server did not take our pre-shared key: its identity or key differs from the server's "
                     "(--tls-psk-file))"
                   : " (the client's pre-shared key is not ours: its identity is not in --tls-psk-file, or its key "
                     "differs)";
  else if (not_tls)
    message += context_->role() == TlsRole::client
                   ? " (the peer does not speak TLS here: a plaintext listener?)"
                   : std::string(client_not_tls);
  else if (nothing_shared)
    // A handshake_failure alert is also how a TLS 1.2 server refuses a client without
    // the certificate it requires, so that case is named as a possibility.
    message += alert_received && context_->role() == TlsRole::client
                   ? " (no cipher suite or TLS version in common with the peer (--tls-ciphers, "
                     "--tls-ciphersuites, --tls12), or it requires a client certificate)"
                   : " (no cipher suite or TLS version in common with the peer: --tls-ciphers, "
                     "--tls-ciphersuites, --tls12)";
  return Error{std::make_error_code(std::errc::protocol_error), message};
}

Status TlsStream::encrypt(std::span<const std::byte> plaintext) {
  if (plaintext.empty()) return Status{};
  if (sealer_)
    return sealer_->seal(TlsRecordSealer::ContentType::application_data, plaintext, out_,
                         [this](std::size_t bytes) { count_record(bytes); });
  ERR_clear_error();
  std::size_t written = 0;
  // The BIO never blocks (it appends to out_), so one call encrypts everything.
  int ret = SSL_write_ex(ssl_, plaintext.data(), plaintext.size(), &written);
  if (ret != 1 || written != plaintext.size()) return tl::unexpected(tls_error("TLS write to " + peer_, ret));
  return Status{};
}

awaitable<Status> TlsStream::transmit(std::span<const Pending> batch, bool more) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Frame& f = batch[i].frame;
    if (f.file.length > 0 || f.piped.length > 0)  // callers check splices() first; TLS must see the bytes
      co_return fail(std::errc::operation_not_supported, "a TLS stream cannot send a file slice");
    Status status;
    if (f.contiguous()) {
      const std::byte* start = f.head.empty() ? f.body.data() : f.head.data();
      status = encrypt({start, f.size()});
    } else {
      // Give the header the first record together with the start of the payload.
      std::size_t first = std::min(f.body.size(), max_record_plaintext - std::min(max_record_plaintext, f.head.size()));
      staging_.assign(f.head.begin(), f.head.end());
      staging_.insert(staging_.end(), f.body.begin(), f.body.begin() + static_cast<std::ptrdiff_t>(first));
      status = encrypt(staging_);
      if (status) status = encrypt(f.body.subspan(first));
    }
    if (!status) co_return status;
    if (out_.size() >= options_.batch_bytes) {
      if (Status s = co_await flush(more || i + 1 < batch.size()); !s) co_return s;
    }
  }
  co_return co_await flush(more);
}

awaitable<Status> TlsStream::flush(bool more) {
  if (out_.empty()) co_return Status{};
  // Send from the other buffer: a read may make OpenSSL append to out_ meanwhile.
  std::swap(out_, sending_);
  std::vector<asio::const_buffer> buffers{asio::const_buffer(sending_.data(), sending_.size())};
  Status status = co_await send_all(socket_, std::move(buffers), more, stats_, peer_);
  sending_.clear();
  // A peer that refuses us after our side of the handshake finished (a missing client
  // certificate under TLS 1.3) says why in an alert, then closes: our next send fails
  // with a bare "Broken pipe" unless the alert is read.
  if (!status && status.error().is_peer_gone()) {
    if (std::string alert = alert_received(); !alert.empty())
      co_return fail(status.error().code,
                     status.error().message + " (the peer ended the TLS session with an alert: " + alert + ")");
  }
  co_return status;
}

std::string TlsStream::alert_received() {
  for (;;) {
    if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
    if (in_end_ == in_.size()) break;
    const ssize_t n = ::recv(socket_.native_handle(), in_.data() + in_end_, in_.size() - in_end_, MSG_DONTWAIT);
    if (n <= 0) break;
    in_end_ += static_cast<std::size_t>(n);
  }
  ERR_clear_error();
  std::array<std::byte, 512> discard{};  // a one-way sender's peer sends no data worth keeping
  std::size_t n = 0;
  if (SSL_read_ex(ssl_, discard.data(), discard.size(), &n) == 1) return {};
  const unsigned long error = ERR_peek_error();
  std::string alert;
  if (ERR_GET_LIB(error) == ERR_LIB_SSL && ERR_GET_REASON(error) >= SSL_AD_REASON_OFFSET) {
    const char* reason = ERR_reason_error_string(error);
    alert = reason != nullptr ? reason : "alert " + std::to_string(ERR_GET_REASON(error) - SSL_AD_REASON_OFFSET);
  }
  ERR_clear_error();
  return alert;
}

awaitable<Status> TlsStream::receive_ciphertext() {
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (in_end_ == in_.size()) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  auto [ec, n] = co_await socket_.async_receive(asio::buffer(in_.data() + in_end_, in_.size() - in_end_), use_nothrow);
  if (ec == asio::error::eof) {
    peer_closed_ = true;
    co_return Status{};
  }
  if (ec) co_return fail(ec, "receiving from " + peer_ + ": " + ec.message());
  in_end_ += n;
  co_return Status{};
}

awaitable<Result<std::size_t>> TlsStream::read_some(std::span<std::byte> into) {
  for (;;) {
    ERR_clear_error();
    std::size_t n = 0;
    int ret = SSL_read_ex(ssl_, into.data(), into.size(), &n);
    // Reading can make TLS answer (a key update); send that before going on.
    if (!out_.empty()) {
      if (Status s = co_await send(Frame{}); !s) co_return tl::unexpected(s.error());
    }
    if (ret == 1) co_return n;
    int error = SSL_get_error(ssl_, ret);
    if (error == SSL_ERROR_ZERO_RETURN) co_return std::size_t{0};  // close_notify: a clean end
    if (error == SSL_ERROR_WANT_READ && !peer_closed_) {
      if (Status s = co_await receive_ciphertext(); !s) co_return tl::unexpected(s.error());
      continue;
    }
    if (peer_closed_)
      co_return fail(std::errc::connection_reset, peer_ + " closed the connection without a TLS close_notify");
    co_return tl::unexpected(tls_error("TLS read from " + peer_, ret));
  }
}

awaitable<Status> TlsStream::read_exactly(std::span<std::byte> into) {
  std::size_t done = 0;
  while (done < into.size()) {
    auto n = co_await read_some(into.subspan(done));
    if (!n) co_return tl::unexpected(n.error());
    if (*n == 0)
      co_return fail(std::errc::connection_reset, peer_ + " closed the connection (" + std::to_string(done) +
                                                      " of " + std::to_string(into.size()) + " bytes read)");
    done += *n;
  }
  co_return Status{};
}

awaitable<Status> TlsStream::close() {
  Status status;
  if (sealer_) {
    constexpr std::array<std::byte, 2> close_notify{std::byte{1}, std::byte{0}};  // warning, close_notify
    status = sealer_->seal(TlsRecordSealer::ContentType::alert, close_notify, out_,
                           [this](std::size_t bytes) { count_record(bytes); });
  } else {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // queues close_notify
  }
  if (status) status = co_await send(Frame{});
  stats_.tcp_segments = tcp_data_segments_sent(socket_.native_handle());
  asio::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_send, ec);
  socket_.close(ec);
  co_return status;
}

void TlsStream::reset() {
  // No close_notify: the peer must not mistake this for the end of a complete stream.
  asio::error_code ignored;
  hard_close(socket_.release(ignored));
}

void TlsStream::stop_receiving() {
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  socket_.cancel(ignored);
}

void TlsStream::abort() {
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.cancel(ignored);
}

StreamStats TlsStream::stats() const {
  StreamStats s = stats_;
  if (socket_.is_open()) s.tcp_segments = tcp_data_segments_sent(const_cast<Socket&>(socket_).native_handle());
  return s;
}

}  // namespace sluice
