// A scratch directory on a real filesystem (holes must work), removed afterwards.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace sluice::test {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("SLUICE_TEST_DIR");
    std::string pattern = std::string(base ? base : "/var/tmp") + "/sluice-test.XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `bytes` at `offset` of `path` (creating it), leaving the rest sparse.
inline void write_at(const std::string& path, std::uint64_t offset, const std::vector<char>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) std::abort();
  if (::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) != static_cast<ssize_t>(bytes.size()))
    std::abort();
  ::close(fd);
}

inline void set_size(const std::string& path, std::uint64_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) std::abort();
  ::close(fd);
}

inline std::uint64_t allocated(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

inline std::vector<char> slurp(const std::string& path) {
  std::vector<char> out;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  ::close(fd);
  return out;
}

inline std::vector<char> noise(std::size_t n, unsigned seed) {
  std::vector<char> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x | 1);
  }
  return out;
}

}  // namespace sluice::test
