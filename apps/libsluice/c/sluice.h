/* Sluice's C ABI: move disk images from C, or from any language with a C FFI
 * (Python's ctypes, OCaml's Ctypes, Go's cgo).
 *
 * Stable by construction: handles are opaque, every options struct begins with its own
 * size (set it to sizeof, so a newer library knows which fields an older caller had),
 * and only sluice_* symbols are exported from libsluice.so.1.
 *
 * Threads:
 * - A handle may be used from any thread, but not freed while another call on it runs.
 * - sluice_transfer_cancel() and sluice_receiver_stop()/abort() may be called from any
 *   thread at any time until the handle is freed, from a progress callback too.
 * - sluice_transfer_start() and sluice_receiver_start() run the work on a thread of the
 *   library's own; progress callbacks are called on that thread, and must not call
 *   sluice_*_wait() or _free() on their own handle.
 * - Strings returned by the library belong to the handle and stay valid until it is
 *   freed; strings passed in are copied.
 *
 * Errors: a call returns 0 on success or an errno value (EINVAL for a usage error,
 * ECANCELED when cancelled, EIO and the like for a transfer error); the handle's
 * sluice_*_error() then says what happened, with the byte offset where one applies.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_ABI_VERSION 1

/* The library's version ("0.1.0") and the ABI it implements. */
const char* sluice_version(void);
int sluice_abi_version(void);

typedef struct sluice_error {
  int code;            /* an errno value; 0: no error */
  int64_t offset;      /* the image offset the message names ("at offset N"); -1: none */
  const char* message; /* one sentence naming the operation and the cause */
} sluice_error;

typedef struct sluice_progress {
  uint64_t done;  /* bytes whose write has completed (never only issued) */
  uint64_t total; /* the image's size */
  double seconds;
} sluice_progress;

typedef void (*sluice_progress_fn)(const sluice_progress* progress, void* user_data);

/* ---- Transfers: one image from a source URI to a destination URI ---------------- */

typedef struct sluice_transfer sluice_transfer;

typedef struct sluice_transfer_options {
  size_t size;              /* sizeof(sluice_transfer_options) */
  const char* protocol;     /* tcp://, tls://, unix://: "chunked" (NULL), "raw" or "nbd" */
  uint32_t depth;           /* requests in flight; 0: automatic */
  uint32_t request_size;    /* bytes per request; 0: automatic */
  uint32_t sparse;          /* zero-detection granularity; 0: the default (4096) */
  int no_sparse;            /* nonzero: no zero detection */
  int destination_is_zero;  /* the destination already reads as zeros */
  int allocated;            /* zeroed ranges stay allocated */
  int no_flush;             /* do not flush at the end */
  int direct;               /* O_DIRECT for local files */
  uint32_t timeout_seconds; /* a peer that stops answering fails the copy; 0: none */
  const char* tls_ca_file;  /* NULL: the system's */
  const char* tls_certificate;
  const char* tls_private_key;
  const char* tls_psk_file;
  int tls_no_verify;
  sluice_progress_fn progress; /* called as writes complete; NULL: none */
  void* progress_user_data;
} sluice_transfer_options;

/* Sets every field to its default (size included). */
void sluice_transfer_options_init(sluice_transfer_options* options);

/* A transfer that has not started. NULL options: the defaults. Returns NULL only when
 * out of memory; a bad URI or option is reported by start or run (EINVAL). */
sluice_transfer* sluice_transfer_new(const char* source, const char* destination,
                                     const sluice_transfer_options* options);

/* Runs the transfer on the calling thread until it ends: 0 once every byte landed and
 * was flushed. Runs once. */
int sluice_transfer_run(sluice_transfer* transfer);

/* Starts the transfer on a thread of the library's own and returns at once. */
int sluice_transfer_start(sluice_transfer* transfer);

/* Waits for a started transfer to end; its result, as sluice_transfer_run's. */
int sluice_transfer_wait(sluice_transfer* transfer);

/* Stops the transfer wherever it is; it then ends with ECANCELED. */
void sluice_transfer_cancel(sluice_transfer* transfer);

/* Progress so far (any thread, any time). */
sluice_progress sluice_transfer_progress(const sluice_transfer* transfer);

typedef struct sluice_transfer_stats {
  size_t size; /* sizeof(sluice_transfer_stats), set by the caller */
  uint64_t image_size;
  uint64_t bytes_read;
  uint64_t bytes_written;
  uint64_t bytes_zeroed;
  uint64_t bytes_skipped;
  uint64_t reads;
  uint64_t writes;
  double seconds;
} sluice_transfer_stats;

/* After a successful end: fills the fields `stats->size` covers. EINVAL otherwise. */
int sluice_transfer_stats_get(const sluice_transfer* transfer, sluice_transfer_stats* stats);

/* After a failed end: the error (code 0 before the end or after success). */
sluice_error sluice_transfer_error(const sluice_transfer* transfer);

/* Cancels and waits for a started transfer, then frees it. NULL is ignored. */
void sluice_transfer_free(sluice_transfer* transfer);

/* ---- Receivers: what `sluice serve` runs, for Chunked and raw images ------------ */

typedef struct sluice_receiver sluice_receiver;

typedef struct sluice_receiver_options {
  size_t size;           /* sizeof(sluice_receiver_options) */
  const char* listen;    /* tcp://HOST:PORT (port 0: any), tls://HOST:PORT, unix:///PATH */
  const char* protocol;  /* "chunked" (NULL) or "raw" */
  const char* output;    /* a file or block device, or "null:" */
  uint64_t image_size;   /* 0: the output's size */
  int http;              /* answer xen-api's import PUT first */
  int once;              /* one sender, whose result run/wait returns */
  const char* tls_certificate;
  const char* tls_private_key;
  const char* tls_ca_file;
} sluice_receiver_options;

void sluice_receiver_options_init(sluice_receiver_options* options);

/* Checks the options and opens the output; NULL with *error set when they do not fit
 * (error->message is then valid until the next call from this thread). */
sluice_receiver* sluice_receiver_new(const sluice_receiver_options* options, sluice_error* error);

/* Binds the listening socket. */
int sluice_receiver_listen(sluice_receiver* receiver);

/* Where it listens, as a URI for a sender ("tcp://127.0.0.1:40123"); "" before listen. */
const char* sluice_receiver_address(const sluice_receiver* receiver);

/* Serves on the calling thread until stopped (or, with `once`, one sender). */
int sluice_receiver_run(sluice_receiver* receiver);
/* The same on a thread of the library's own; wait for its result. */
int sluice_receiver_start(sluice_receiver* receiver);
int sluice_receiver_wait(sluice_receiver* receiver);

/* stop: accept no more, let transfers in progress finish. abort: cut them short. */
void sluice_receiver_stop(sluice_receiver* receiver);
void sluice_receiver_abort(sluice_receiver* receiver);

sluice_error sluice_receiver_error(const sluice_receiver* receiver);

/* Aborts and waits for a started receiver, then frees it. NULL is ignored. */
void sluice_receiver_free(sluice_receiver* receiver);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
