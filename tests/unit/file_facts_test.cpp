#include "storage/file_facts.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "skip.hpp"
#include "temp_dir.hpp"

using sluice::inspect_image_file;
using sluice::UniqueFd;

namespace {

// The filesystem type as coreutils names it ("tmpfs", "ext2/ext3", "xfs", ...): an
// oracle independent of the statfs magic numbers the code under test compares.
std::string filesystem_type(const std::string& path) {
  std::string command = "stat -f -c %T '" + path + "' 2>/dev/null";
  std::FILE* out = ::popen(command.c_str(), "r");
  if (!out) return {};
  char line[128] = {};
  std::string type = std::fgets(line, sizeof line, out) ? line : "";
  ::pclose(out);
  while (!type.empty() && (type.back() == '\n' || type.back() == ' ')) type.pop_back();
  return type;
}

bool memory_backed(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  REQUIRE(fd);
  auto info = inspect_image_file(fd.get(), path);
  REQUIRE(info);
  return info->memory_backed;
}

}  // namespace

TEST_CASE("a file on tmpfs is memory-backed" * doctest::test_suite("environment")) {
  if (filesystem_type("/dev/shm") != "tmpfs") {
    sluice::test::skip_test("no tmpfs at /dev/shm here");
    return;
  }
  std::string path = "/dev/shm/sluice-image-file-test." + std::to_string(::getpid());
  bool backed = memory_backed(path);
  ::unlink(path.c_str());
  CHECK(backed);
}

TEST_CASE("a file in the scratch directory is memory-backed exactly when its filesystem is tmpfs or ramfs") {
  sluice::test::TempDir dir;
  REQUIRE(!dir.path().empty());
  std::string type = filesystem_type(dir.path());
  REQUIRE(!type.empty());
  CHECK(memory_backed(dir.file("image")) == (type == "tmpfs" || type == "ramfs"));
}
