// TcpCork: holds a TCP socket's partial last segment back while a sender knows more
// bytes are on their way, and lets it go when the burst ends.
//
// MSG_MORE alone is not enough: it holds the tail only within its own sendmsg. When an
// ACK frees room after that call returned, the kernel transmits the queue with the
// socket's own setting, and under TCP_NODELAY that sends the partial tail at once;
// the next write then starts a new segment, so a stream takes more segments than its
// bytes need (docs/benchmarks.md, section "TCP_CORK while frames are queued").
// TCP_CORK is the socket's own setting, so it holds across ACKs until released (or
// for at most 200 ms, the kernel's limit).
#pragma once

namespace sluice {

class TcpCork {
 public:
  explicit TcpCork(int fd) : fd_(fd) {}

  // Sets TCP_CORK unless already set. False where the socket has no such option (a
  // Unix socket has no segments to hold back); it is not asked again then.
  bool hold();
  // Clears TCP_CORK if hold() set it: the kernel sends the held tail now.
  void release();
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
  bool works_ = true;
};

}  // namespace sluice
