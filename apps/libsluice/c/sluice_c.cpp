// The C ABI (sluice.h) over the C++ Transfer and Receiver: each handle owns its event
// loop and, when started, the thread that runs it.
#include "apps/libsluice/c/sluice.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "apps/libsluice/sluice.hpp"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace {

using namespace sluice;

// The error a handle reports: the errno value, the offset its message names and the
// message itself (kept alive by the handle).
struct StoredError {
  int code = 0;
  std::int64_t offset = -1;
  std::string message;

  void set(const Error& error) {
    code = errno_of(error.code);
    if (code == 0) code = EIO;
    message = error.message;
    offset = -1;
    // Data-path errors say "... at offset N: cause" (fail_at); the first such N is the one.
    const std::string marker = "at offset ";
    if (auto at = message.find(marker); at != std::string::npos) {
      const char* digits = message.c_str() + at + marker.size();
      char* end = nullptr;
      const unsigned long long value = std::strtoull(digits, &end, 10);
      if (end != digits) offset = static_cast<std::int64_t>(value);
    }
  }
  sluice_error view() const { return {code, offset, message.c_str()}; }
};

std::string text(const char* s) { return s != nullptr ? s : ""; }

}  // namespace

struct sluice_transfer {
  std::string source;
  std::string destination;
  sluice_transfer_options options{};
  Cancellation cancellation;
  std::optional<Transfer> transfer;
  std::thread thread;
  std::mutex mutex;  // the outcome, written once by the run
  bool ran = false;
  std::optional<TransferStats> stats;
  StoredError error;
  int result = 0;
};

struct sluice_receiver {
  ReceiverOptions options;
  asio::io_context context{1};
  std::unique_ptr<Receiver> receiver;
  std::thread thread;
  bool ran = false;
  StoredError error;
  int result = 0;
};

extern "C" {

const char* sluice_version(void) { return SLUICE_VERSION; }
int sluice_abi_version(void) { return SLUICE_ABI_VERSION; }

void sluice_transfer_options_init(sluice_transfer_options* options) {
  *options = sluice_transfer_options{};
  options->size = sizeof(*options);
}

sluice_transfer* sluice_transfer_new(const char* source, const char* destination,
                                     const sluice_transfer_options* options) {
  auto* t = new (std::nothrow) sluice_transfer;
  if (t == nullptr) return nullptr;
  t->source = text(source);
  t->destination = text(destination);
  sluice_transfer_options_init(&t->options);
  if (options != nullptr) {
    // Copy what the caller's version of the struct holds; the rest keeps its default.
    const std::size_t known = std::min(options->size, sizeof(t->options));
    std::memcpy(&t->options, options, known);
    t->options.size = sizeof(t->options);
  }
  return t;
}

namespace {

int finish_transfer(sluice_transfer* t, const Result<TransferStats>& outcome) {
  std::lock_guard lock(t->mutex);
  if (outcome) {
    t->stats = *outcome;
    t->result = 0;
  } else {
    t->error.set(outcome.error());
    t->result = t->error.code;
  }
  return t->result;
}

int run_transfer(sluice_transfer* t) {
  const sluice_transfer_options& o = t->options;
  EndpointOptions endpoints;
  endpoints.protocol = text(o.protocol);
  endpoints.file.direct = o.direct != 0;
  endpoints.timeout = std::chrono::seconds(o.timeout_seconds);
  endpoints.tls.ca_file = text(o.tls_ca_file);
  endpoints.tls.certificate = text(o.tls_certificate);
  endpoints.tls.private_key = text(o.tls_private_key);
  endpoints.tls.psk_file = text(o.tls_psk_file);
  if (o.tls_no_verify != 0) endpoints.tls.verify_peer = false;
  CopyOptions copy;
  copy.depth = o.depth;
  copy.request_size = o.request_size;
  if (o.sparse != 0) copy.sparse = o.sparse;
  if (o.no_sparse != 0) copy.sparse = 0;
  copy.destination_is_zero = o.destination_is_zero != 0;
  copy.allocated = o.allocated != 0;
  copy.flush = o.no_flush == 0;
  copy.cancellation = &t->cancellation;
  // As `sluice copy`: a peer given this long to answer gets as long for what is in
  // flight when the transfer stops.
  if (o.timeout_seconds != 0) copy.stop_grace = endpoints.timeout;
  if (o.progress != nullptr) {
    sluice_progress_fn fn = o.progress;
    void* user = o.progress_user_data;
    copy.progress = [fn, user](const ProgressUpdate& update) {
      const sluice_progress p{update.done, update.total, update.seconds};
      fn(&p, user);
    };
  }
  // The checks `sluice copy` makes before opening anything: a bad URI is EINVAL.
  if (Status ok = check_source(t->source, endpoints); !ok) return finish_transfer(t, tl::unexpected(ok.error()));
  if (Status ok = check_destination(t->destination, endpoints); !ok)
    return finish_transfer(t, tl::unexpected(ok.error()));
  {
    std::lock_guard lock(t->mutex);  // sluice_transfer_progress reads it from other threads
    t->transfer.emplace(t->source, t->destination, endpoints, copy);
  }
  return finish_transfer(t, run_blocking(*t->transfer));
}

}  // namespace

int sluice_transfer_run(sluice_transfer* t) {
  if (t->ran) return EALREADY;
  t->ran = true;
  return run_transfer(t);
}

int sluice_transfer_start(sluice_transfer* t) {
  if (t->ran) return EALREADY;
  t->ran = true;
  try {
    t->thread = std::thread([t] { run_transfer(t); });
  } catch (const std::system_error& e) {
    return e.code().value() != 0 ? e.code().value() : EAGAIN;
  }
  return 0;
}

int sluice_transfer_wait(sluice_transfer* t) {
  if (t->thread.joinable()) t->thread.join();
  if (!t->ran) return EINVAL;
  std::lock_guard lock(t->mutex);
  return t->result;
}

void sluice_transfer_cancel(sluice_transfer* t) { t->cancellation.request(); }

sluice_progress sluice_transfer_progress(const sluice_transfer* t) {
  auto* self = const_cast<sluice_transfer*>(t);
  std::lock_guard lock(self->mutex);
  if (!self->transfer) return {0, 0, 0};
  const ProgressUpdate p = self->transfer->progress();
  return {p.done, p.total, p.seconds};
}

int sluice_transfer_stats_get(const sluice_transfer* t, sluice_transfer_stats* stats) {
  auto* self = const_cast<sluice_transfer*>(t);
  std::lock_guard lock(self->mutex);
  if (!self->stats || stats == nullptr) return EINVAL;
  sluice_transfer_stats all{};
  all.size = sizeof(all);
  all.image_size = self->stats->size;
  all.bytes_read = self->stats->bytes_read;
  all.bytes_written = self->stats->bytes_written;
  all.bytes_zeroed = self->stats->bytes_zeroed;
  all.bytes_skipped = self->stats->bytes_skipped;
  all.reads = self->stats->reads;
  all.writes = self->stats->writes;
  all.seconds = self->stats->seconds;
  const std::size_t wanted = std::min(stats->size, sizeof(all));
  std::memcpy(stats, &all, wanted);
  stats->size = wanted;
  return 0;
}

sluice_error sluice_transfer_error(const sluice_transfer* t) {
  auto* self = const_cast<sluice_transfer*>(t);
  std::lock_guard lock(self->mutex);
  return self->error.view();
}

void sluice_transfer_free(sluice_transfer* t) {
  if (t == nullptr) return;
  t->cancellation.request();
  if (t->thread.joinable()) t->thread.join();
  delete t;
}

void sluice_receiver_options_init(sluice_receiver_options* options) {
  *options = sluice_receiver_options{};
  options->size = sizeof(*options);
}

sluice_receiver* sluice_receiver_new(const sluice_receiver_options* options, sluice_error* error) {
  thread_local StoredError last;
  auto refuse = [&](const Error& e) -> sluice_receiver* {
    last.set(e);
    if (error != nullptr) *error = last.view();
    return nullptr;
  };
  if (options == nullptr) return refuse(Error{std::make_error_code(std::errc::invalid_argument), "no options"});
  sluice_receiver_options o{};
  sluice_receiver_options_init(&o);
  std::memcpy(&o, options, std::min(options->size, sizeof(o)));
  auto* r = new (std::nothrow) sluice_receiver;
  if (r == nullptr) return refuse(Error{std::make_error_code(std::errc::not_enough_memory), "out of memory"});
  ReceiverOptions& ro = r->options;
  ro.listen = text(o.listen);
  ro.protocol = o.protocol != nullptr ? o.protocol : "chunked";
  ro.protocol_fixed = o.protocol != nullptr;
  ro.output = text(o.output);
  if (o.image_size != 0) ro.size = o.image_size;
  ro.http = o.http != 0;
  ro.once = o.once != 0;
  ro.tls.certificate = text(o.tls_certificate);
  ro.tls.private_key = text(o.tls_private_key);
  ro.tls.ca_file = text(o.tls_ca_file);
  auto created = Receiver::create(r->context.get_executor(), ro);
  if (!created) {
    delete r;
    return refuse(created.error());
  }
  r->receiver = std::move(*created);
  if (error != nullptr) *error = sluice_error{0, -1, ""};
  return r;
}

int sluice_receiver_listen(sluice_receiver* r) {
  if (Status bound = r->receiver->listen(); !bound) {
    r->error.set(bound.error());
    return r->error.code;
  }
  return 0;
}

const char* sluice_receiver_address(const sluice_receiver* r) { return r->receiver->address().c_str(); }

namespace {

// Marked as run by the caller of run or start, on its own thread, so a second call
// (or a start racing its own thread) is refused rather than serving twice.
int serve(sluice_receiver* r) {
  std::optional<Status> result;
  asio::co_spawn(r->context, r->receiver->run(), [&](std::exception_ptr e, Status status) {
    result = e ? fail(std::errc::io_error, "internal error in the receiver") : std::move(status);
  });
  r->context.run();
  if (!result) result = fail(std::errc::io_error, "the receiver did not finish");
  if (!*result) {
    r->error.set(result->error());
    r->result = r->error.code;
  }
  return r->result;
}

}  // namespace

int sluice_receiver_run(sluice_receiver* r) {
  if (r->ran) return EALREADY;
  r->ran = true;
  return serve(r);
}

int sluice_receiver_start(sluice_receiver* r) {
  if (r->ran) return EALREADY;
  r->ran = true;
  try {
    r->thread = std::thread([r] { serve(r); });
  } catch (const std::system_error& e) {
    return e.code().value() != 0 ? e.code().value() : EAGAIN;
  }
  return 0;
}

int sluice_receiver_wait(sluice_receiver* r) {
  if (r->thread.joinable()) r->thread.join();
  return r->result;
}

void sluice_receiver_stop(sluice_receiver* r) { r->receiver->stop(); }
void sluice_receiver_abort(sluice_receiver* r) { r->receiver->abort(); }

sluice_error sluice_receiver_error(const sluice_receiver* r) { return r->error.view(); }

void sluice_receiver_free(sluice_receiver* r) {
  if (r == nullptr) return;
  if (r->thread.joinable()) {
    r->receiver->abort();
    r->thread.join();
  }
  delete r;
}

}  // extern "C"
