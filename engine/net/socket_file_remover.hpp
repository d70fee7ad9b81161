// Removes the socket file a Unix-socket server bound, when the server is done, so the
// path does not outlive it as a stale socket nobody listens on. Only if the path
// still names that very socket: another server may have taken the path since.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace sluice {

class SocketFileRemover {
 public:
  SocketFileRemover() = default;
  // Remembers the socket file now at `path` (nothing if there is none).
  explicit SocketFileRemover(std::string path) : path_(std::move(path)) {
    struct stat st {};
    if (::lstat(path_.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      path_.clear();
      return;
    }
    device_ = st.st_dev;
    inode_ = st.st_ino;
  }
  ~SocketFileRemover() {
    struct stat st {};
    if (!path_.empty() && ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == device_ &&
        st.st_ino == inode_)
      ::unlink(path_.c_str());
  }
  SocketFileRemover(const SocketFileRemover&) = delete;
  SocketFileRemover& operator=(const SocketFileRemover&) = delete;

 private:
  std::string path_;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace sluice
