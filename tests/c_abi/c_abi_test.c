/* The C ABI used as a C11 program would (compiled with -Wall -Werror): copies with
 * sluice_transfer_run and with start/wait and a progress callback, through a receiver
 * on a port it picks, a cancel from another thread, and errors; every copy's bytes are
 * compared with the source's. Exit 0: all passed. Argument: a scratch directory. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"

static int failures = 0;

#define CHECK(cond, ...)                    \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);         \
      fputc('\n', stderr);                  \
      ++failures;                           \
    }                                       \
  } while (0)

static void path_in(char* out, size_t size, const char* dir, const char* name) {
  snprintf(out, size, "%s/%s", dir, name);
}

/* A file of `size` bytes: random data at the start and in the middle, a hole between. */
static int make_source(const char* path, size_t size) {
  FILE* f = fopen(path, "wb");
  if (f == NULL) return -1;
  unsigned seed = 12345;
  for (size_t i = 0; i < size; ++i) {
    seed = seed * 1103515245u + 12345u;
    const int in_hole = i >= size / 4 && i < size / 2;
    fputc(in_hole ? 0 : (int)(seed >> 16) & 0xff, f);
  }
  return fclose(f);
}

static int same_bytes(const char* a, const char* b) {
  FILE* fa = fopen(a, "rb");
  FILE* fb = fopen(b, "rb");
  int same = fa != NULL && fb != NULL;
  while (same) {
    const int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) same = 0;
    if (ca == EOF || cb == EOF) break;
  }
  if (fa != NULL) fclose(fa);
  if (fb != NULL) fclose(fb);
  return same;
}

struct seen {
  uint64_t calls;
  uint64_t last_done;
  uint64_t total;
  int went_back;
};

static void on_progress(const sluice_progress* progress, void* user_data) {
  struct seen* seen = user_data;
  if (progress->done < seen->last_done) seen->went_back = 1;
  seen->last_done = progress->done;
  seen->total = progress->total;
  ++seen->calls;
}

static void* cancel_later(void* transfer) {
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  sluice_transfer_cancel(transfer);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_abi_test SCRATCH_DIR\n");
    return 2;
  }
  const char* dir = argv[1];
  char source[4096], copy[4096], received[4096], uri[4200];
  path_in(source, sizeof source, dir, "source.img");
  path_in(copy, sizeof copy, dir, "copy.img");
  path_in(received, sizeof received, dir, "received.img");
  const size_t size = 6u << 20;
  if (make_source(source, size) != 0) {
    perror("source");
    return 1;
  }

  CHECK(sluice_abi_version() == SLUICE_ABI_VERSION, "abi version %d", sluice_abi_version());
  CHECK(strlen(sluice_version()) > 0, "no version");

  /* 1. A blocking copy, with stats. */
  sluice_transfer* t = sluice_transfer_new(source, copy, NULL);
  CHECK(t != NULL, "sluice_transfer_new");
  int rc = sluice_transfer_run(t);
  CHECK(rc == 0, "run: %d %s", rc, sluice_transfer_error(t).message);
  CHECK(same_bytes(source, copy), "the copy differs from the source");
  sluice_transfer_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.size = sizeof stats;
  CHECK(sluice_transfer_stats_get(t, &stats) == 0, "stats");
  CHECK(stats.image_size == size, "stats.image_size %llu", (unsigned long long)stats.image_size);
  CHECK(sluice_transfer_error(t).code == 0, "an error after success");
  CHECK(sluice_transfer_run(t) == EALREADY, "a second run");
  sluice_transfer_free(t);

  /* 2. Through a receiver on a port it picks, started on the library's threads, with
   *    progress by callback. */
  sluice_receiver_options ro;
  sluice_receiver_options_init(&ro);
  ro.listen = "tcp://127.0.0.1:0";
  ro.output = received;
  ro.image_size = size;
  ro.once = 1;
  sluice_error error;
  sluice_receiver* r = sluice_receiver_new(&ro, &error);
  CHECK(r != NULL, "sluice_receiver_new: %s", error.message);
  if (r != NULL) {
    CHECK(sluice_receiver_listen(r) == 0, "listen");
    snprintf(uri, sizeof uri, "%s", sluice_receiver_address(r));
    CHECK(strncmp(uri, "tcp://127.0.0.1:", 16) == 0, "address %s", uri);
    CHECK(sluice_receiver_start(r) == 0, "receiver start");
    struct seen seen = {0, 0, 0, 0};
    sluice_transfer_options options;
    sluice_transfer_options_init(&options);
    options.progress = on_progress;
    options.progress_user_data = &seen;
    options.depth = 4;
    t = sluice_transfer_new(source, uri, &options);
    CHECK(sluice_transfer_start(t) == 0, "transfer start");
    rc = sluice_transfer_wait(t);
    CHECK(rc == 0, "transfer to the receiver: %d %s", rc, sluice_transfer_error(t).message);
    CHECK(seen.calls > 0 && !seen.went_back && seen.total == size, "progress: %llu calls, back %d, total %llu",
          (unsigned long long)seen.calls, seen.went_back, (unsigned long long)seen.total);
    sluice_progress polled = sluice_transfer_progress(t);
    CHECK(polled.total == size && polled.done == size, "polled progress %llu/%llu", (unsigned long long)polled.done,
          (unsigned long long)polled.total);
    sluice_transfer_free(t);
    rc = sluice_receiver_wait(r);
    CHECK(rc == 0, "receiver: %d %s", rc, sluice_receiver_error(r).message);
    CHECK(same_bytes(source, received), "the received image differs from the source");
    sluice_receiver_free(r);
  }

  /* 3. Cancelled from another thread while stuck on a receiver that never reads. */
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  CHECK(bind(listener, (struct sockaddr*)&address, sizeof address) == 0 && listen(listener, 1) == 0 &&
            getsockname(listener, (struct sockaddr*)&address, &length) == 0,
        "a listener that never reads");
  snprintf(uri, sizeof uri, "tcp://127.0.0.1:%d", ntohs(address.sin_port));
  t = sluice_transfer_new(source, uri, NULL);
  pthread_t canceller;
  pthread_create(&canceller, NULL, cancel_later, t);
  rc = sluice_transfer_run(t);
  pthread_join(canceller, NULL);
  CHECK(rc == ECANCELED, "cancelled: %d %s", rc, sluice_transfer_error(t).message);
  CHECK(strstr(sluice_transfer_error(t).message, "cancelled") != NULL, "message: %s", sluice_transfer_error(t).message);
  sluice_transfer_free(t);
  close(listener);

  /* 4. Errors: a usage error and a missing source, each with its message. */
  t = sluice_transfer_new(source, "bogus://x", NULL);
  rc = sluice_transfer_run(t);
  CHECK(rc == EINVAL, "bogus destination: %d", rc);
  CHECK(strstr(sluice_transfer_error(t).message, "unsupported destination 'bogus://x'") != NULL, "message: %s",
        sluice_transfer_error(t).message);
  CHECK(sluice_transfer_error(t).offset == -1, "an offset for a usage error");
  sluice_transfer_free(t);
  path_in(received, sizeof received, dir, "no-such-file.img");
  t = sluice_transfer_new(received, copy, NULL);
  rc = sluice_transfer_run(t);
  CHECK(rc == ENOENT, "missing source: %d %s", rc, sluice_transfer_error(t).message);
  sluice_transfer_free(t);
  ro.output = "null:";
  ro.image_size = 0;
  r = sluice_receiver_new(&ro, &error);
  CHECK(r == NULL && error.code == EINVAL && strstr(error.message, "--size") != NULL,
        "a null: receiver without a size: %d %s", error.code, error.message);

  /* 5. An older caller's options struct (only its first fields) still works. */
  sluice_transfer_options old;
  sluice_transfer_options_init(&old);
  old.size = offsetof(sluice_transfer_options, request_size);
  old.depth = 2;
  old.no_flush = 1; /* past the old size: must be ignored, so the copy is flushed */
  t = sluice_transfer_new(source, copy, &old);
  rc = sluice_transfer_run(t);
  CHECK(rc == 0 && same_bytes(source, copy), "a short options struct: %d", rc);
  sluice_transfer_free(t);

  sluice_transfer_free(NULL);
  sluice_receiver_free(NULL);
  if (failures == 0) printf("c_abi_test: all passed\n");
  return failures == 0 ? 0 : 1;
}
