/* An LD_PRELOAD shim for stream_socket_options.sh. Sluice sends through io_uring, whose
 * flags strace cannot see, so this logs, at io_uring_submit(), every queued SQE that
 * sends to or receives from a socket, with its MSG_MORE / SPLICE_F_MORE flag; and
 * setsockopt(TCP_CORK) and shutdown(). The log goes to $SQE_LOG; check_sends.py reads it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int log_fd = -1;

static void say(const char* format, ...) {
  if (log_fd < 0) {
    const char* path = getenv("SQE_LOG");
    if (path == NULL || (log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) return;
  }
  char line[256];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(line, sizeof line, format, ap);
  va_end(ap);
  if (n > 0) (void)!write(log_fd, line, (size_t)n);
}

/* "tcp" or "unix" for a socket, NULL for anything else. */
static const char* family(int fd) {
  struct stat st;
  int domain = 0;
  socklen_t len = sizeof domain;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return NULL;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return "socket";
  return domain == AF_UNIX ? "unix" : "tcp";
}

static void log_pending(struct io_uring* ring) {
  const unsigned shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;
  for (unsigned i = ring->sq.sqe_head; i != ring->sq.sqe_tail; ++i) {
    const struct io_uring_sqe* sqe = &ring->sq.sqes[(i & ring->sq.ring_mask) << shift];
    if (sqe->flags & IOSQE_FIXED_FILE) {
      say("%d fixed-file %d op%u\n", getpid(), sqe->fd, sqe->opcode);
      continue;
    }
    const int fd = sqe->fd;
    const char* kind = family(fd);
    unsigned long long len = sqe->len;
    switch (sqe->opcode) {
      case IORING_OP_SENDMSG:
      case IORING_OP_SENDMSG_ZC:
        if (kind == NULL) break;
        len = 0;
        const struct msghdr* m = (const struct msghdr*)(unsigned long)sqe->addr;
        for (size_t k = 0; k < m->msg_iovlen; ++k) len += m->msg_iov[k].iov_len;
        /* fall through */
      case IORING_OP_SEND:
      case IORING_OP_SEND_ZC:
        if (kind != NULL) say("%d send %d %s %llu %s\n", getpid(), fd, kind, len, (sqe->msg_flags & MSG_MORE) ? "more" : "last");
        break;
      case IORING_OP_SPLICE:
        if (kind != NULL) {
          say("%d splice %d %s %llu %s\n", getpid(), fd, kind, len, (sqe->splice_flags & SPLICE_F_MORE) ? "more" : "last");
        } else if (!(sqe->splice_flags & SPLICE_F_FD_IN_FIXED) && (kind = family(sqe->splice_fd_in)) != NULL) {
          say("%d recv %d %s\n", getpid(), sqe->splice_fd_in, kind);
        }
        break;
      case IORING_OP_WRITE:
      case IORING_OP_WRITEV:
        if (kind != NULL) say("%d write %d %s %llu\n", getpid(), fd, kind, len);
        break;
      case IORING_OP_RECV:
      case IORING_OP_RECVMSG:
      case IORING_OP_READ:
      case IORING_OP_READV:
        if (kind != NULL) say("%d recv %d %s\n", getpid(), fd, kind);
        break;
      case IORING_OP_POLL_ADD:
        if (kind != NULL) say("%d poll %d %s %u\n", getpid(), fd, kind, sqe->poll32_events);
        break;
    }
  }
}

int io_uring_submit(struct io_uring* ring) {
  static int (*real)(struct io_uring*);
  if (real == NULL) real = (int (*)(struct io_uring*))dlsym(RTLD_NEXT, "io_uring_submit");
  log_pending(ring);
  return real(ring);
}

int io_uring_submit_and_wait(struct io_uring* ring, unsigned wait_nr) {
  static int (*real)(struct io_uring*, unsigned);
  if (real == NULL) real = (int (*)(struct io_uring*, unsigned))dlsym(RTLD_NEXT, "io_uring_submit_and_wait");
  log_pending(ring);
  return real(ring, wait_nr);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  static int (*real)(int, int, int, const void*, socklen_t);
  if (real == NULL) real = (int (*)(int, int, int, const void*, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
  const int ret = real(fd, level, name, value, len);
  if (ret == 0 && level == IPPROTO_TCP && name == TCP_CORK && len == sizeof(int))
    say("%d cork %d tcp %d\n", getpid(), fd, *(const int*)value);
  return ret;
}

int shutdown(int fd, int how) {
  static int (*real)(int, int);
  if (real == NULL) real = (int (*)(int, int))dlsym(RTLD_NEXT, "shutdown");
  const char* kind = family(fd);
  if (kind != NULL) say("%d shutdown %d %s %d\n", getpid(), fd, kind, how);
  return real(fd, how);
}
