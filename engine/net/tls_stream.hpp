// A TLS stream on our own SSL object, not asio::ssl::stream: OpenSSL reads and writes
// ciphertext through a small custom BIO into plain byte vectors, so
//  - a frame whose header sits in front of its payload is encrypted in one SSL_write
//    (the header shares the payload's first record);
//  - a header that is not contiguous is staged with the first part of its payload, so
//    no record ever carries a header alone;
//  - ciphertext of a whole batch leaves in large socket writes, not one per record;
//  - a TLS 1.3 client seals its own records after the handshake (TlsRecordSealer),
//    straight from the caller's bytes into the batch.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <openssl/ssl.h>

#include "engine/net/socket_stream.hpp"
#include "engine/net/stream.hpp"
#include "engine/net/tls_context.hpp"
#include "engine/net/tls_record_sealer.hpp"

namespace sluice {

class TlsStream final : public Stream {
 public:
  // Runs the TLS handshake on a connected socket (fresh, or after a plaintext
  // negotiation such as NBD's STARTTLS). A client checks `hostname` unless verification
  // is off; a failure says what went wrong (certificate, name, protocol, peer gone).
  static awaitable<Result<std::unique_ptr<TlsStream>>> handshake(std::shared_ptr<TlsContext> context,
                                                                 Socket socket, StreamOptions options,
                                                                 std::string hostname = {});
  ~TlsStream() override;

  // How a server's handshake failure ends when the client sent something other than
  // TLS; the listener adds what the client should do instead.
  static constexpr std::string_view client_not_tls = " (the client does not speak TLS)";

  awaitable<Status> read_exactly(std::span<std::byte> into) override;
  awaitable<Result<std::size_t>> read_some(std::span<std::byte> into) override;
  awaitable<Status> close() override;
  void abort() override;
  void reset() override;
  void stop_receiving() override;
  StreamStats stats() const override;
  bool is_tls() const override { return true; }
  std::string peer() const override { return peer_; }

  // Called with the length of every record written (header included); for tests that
  // assert how headers and payloads share records.
  void observe_records(std::function<void(std::size_t)> observer) { record_observer_ = std::move(observer); }
  std::string protocol_version() const { return SSL_get_version(ssl_); }
  SSL* native_handle() const { return ssl_; }
  std::string cipher() const { return ssl_ != nullptr ? SSL_get_cipher_name(ssl_) : ""; }
  // Whether this stream seals its records itself (a TLS 1.3 client; else OpenSSL does).
  bool seals_own_records() const { return sealer_ != nullptr; }
  // Key updates sent so far by the stream's own sealer.
  std::uint64_t key_updates() const { return sealer_ ? sealer_->key_updates() : 0; }

 protected:
  awaitable<Status> transmit(std::span<const Pending> batch, bool more) override;
  std::size_t batch_bytes() const override { return options_.batch_bytes; }
  std::chrono::seconds stall_timeout() const override { return options_.stall_timeout; }
  std::size_t batch_frames() const override { return 64; }
  TcpCork* cork() override { return &cork_; }

 private:
  TlsStream(std::shared_ptr<TlsContext> context, Socket socket, StreamOptions options);
  static int bio_write(BIO* bio, const char* data, std::size_t length, std::size_t* written);
  static int bio_read(BIO* bio, char* data, std::size_t length, std::size_t* read);
  static long bio_ctrl(BIO* bio, int command, long number, void* pointer);
  static void message_callback(int write_p, int version, int content_type, const void* buf, std::size_t len,
                               SSL* ssl, void* arg);

  awaitable<Status> run_handshake(const std::string& hostname);
  Status encrypt(std::span<const std::byte> plaintext);
  void adopt_record_layer();
  void count_record(std::size_t bytes);
  awaitable<Status> flush(bool more);
  awaitable<Status> receive_ciphertext();
  // The TLS alert the peer sent before it closed, if it already arrived ("tlsv13 alert
  // certificate required"); empty if none. Reads without waiting.
  std::string alert_received();
  Error tls_error(const std::string& what, int ret);

  std::shared_ptr<TlsContext> context_;
  Socket socket_;
  StreamOptions options_;
  TcpCork cork_;  // held while frames are queued behind the batch being sent
  std::string peer_;
  SSL* ssl_ = nullptr;
  CiphertextBytes out_;      // ciphertext not yet sent
  CiphertextBytes sending_;  // ciphertext being sent
  // The client's first application traffic secret, filled in by TlsContext's key-log
  // callback during the handshake and wiped once the sealer has it.
  std::vector<unsigned char> client_write_secret_;
  std::unique_ptr<TlsRecordSealer> sealer_;
  std::vector<std::byte> in_;   // ciphertext received, [in_begin_, in_end_) not yet decrypted
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  bool peer_closed_ = false;
  std::vector<std::byte> staging_;  // a detached header and the start of its payload
  StreamStats stats_;
  std::function<void(std::size_t)> record_observer_;
};

}  // namespace sluice
