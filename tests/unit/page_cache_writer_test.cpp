// PageCacheWriter: writes that wait for a turn go to the kernel as one chain, every
// byte lands, and a write that fails in a chain fails alone, naming its offset.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "engine/task_group.hpp"
#include "engine/unique_fd.hpp"
#include "run_loop.hpp"
#include "storage/page_cache_writer.hpp"
#include "temp_dir.hpp"

using namespace sluice;
using test::TempDir;

namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Short writes with gaps between them, every other 4 KiB block, as zero detection
// leaves them; each block filled with its own index.
struct Scattered {
  static constexpr std::size_t block = 4096;
  explicit Scattered(std::size_t count) : bytes(count * block) {
    for (std::size_t i = 0; i < count; ++i)
      std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(i * block), block, static_cast<std::byte>(i % 251 + 1));
  }
  std::span<const std::byte> at(std::size_t i) const { return std::span(bytes).subspan(i * block, block); }
  std::uint64_t offset(std::size_t i) const { return 2 * i * block; }
  std::vector<std::byte> bytes;
};

// Starts a write of every block at once and waits for them all; the statuses in order.
awaitable<std::vector<Status>> write_all_at_once(PageCacheWriter& writer, const Scattered& blocks, std::size_t count) {
  std::vector<Status> statuses(count);
  TaskGroup group(co_await asio::this_coro::executor, [](const Error&) {});
  for (std::size_t i = 0; i < count; ++i)
    group.spawn([](PageCacheWriter& w, std::uint64_t offset, std::span<const std::byte> bytes,
                   Status& out) -> awaitable<Status> {
      out = co_await w.write(offset, bytes);
      co_return Status{};
    }(writer, blocks.offset(i), blocks.at(i), statuses[i]));
  co_await group.join();
  co_return statuses;
}

void check_scattered_writes(std::size_t turns) {
  TempDir dir;
  const std::string path = dir.file("scattered.img");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  REQUIRE(fd);
  constexpr std::size_t count = 600;  // more than one chain holds
  Scattered blocks(count);
  asio::io_context context(1);
  PageCacheWriter writer(context.get_executor(), FileRing::of(context.get_executor()), fd.get(), turns);
  auto statuses = test::run(context, write_all_at_once(writer, blocks, count));
  for (const Status& s : statuses) CHECK(s);
  CHECK(writer.chained_writes() == count);
  // The first writes take the free turns alone; the rest queue behind them.
  CHECK(writer.chains() < count / 8);
  CHECK(writer.chains() >= count / FileRing::max_chain);
  const std::vector<char> written = read_file(path);
  REQUIRE(written.size() == blocks.offset(count - 1) + Scattered::block);
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(std::memcmp(written.data() + blocks.offset(i), blocks.at(i).data(), Scattered::block) == 0);
    if (i + 1 < count)
      CHECK(std::all_of(written.begin() + static_cast<std::ptrdiff_t>(blocks.offset(i) + Scattered::block),
                        written.begin() + static_cast<std::ptrdiff_t>(blocks.offset(i + 1)),
                        [](char c) { return c == 0; }));
  }
}

}  // namespace

TEST_CASE("page-cache writer: writes that wait for a turn go as chains, and every byte lands where it belongs") {
  SUBCASE("one turn, as for a regular file") { check_scattered_writes(1); }
  SUBCASE("four turns, as for a block device: chains side by side") { check_scattered_writes(4); }
}

TEST_CASE("page-cache writer: writes past the file-size limit fail with their own offsets, and those before it landed") {
  // The file-size limit (ulimit -f) fails writes past it with EFBIG, and one across it
  // comes up short: both end a chain in the kernel.
  TempDir dir;
  const std::string path = dir.file("limited.img");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  REQUIRE(fd);
  constexpr std::size_t count = 64;
  Scattered blocks(count);
  // Block 40 starts at 320 KiB; the limit falls inside it.
  const std::uint64_t limit = blocks.offset(40) + 1000;
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  struct rlimit lowered = saved;
  lowered.rlim_cur = limit;
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lowered) == 0);
  asio::io_context context(1);
  PageCacheWriter writer(context.get_executor(), FileRing::of(context.get_executor()), fd.get(), 1);
  auto statuses = test::run(context, write_all_at_once(writer, blocks, count));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  for (std::size_t i = 0; i < 40; ++i) CHECK(statuses[i]);
  for (std::size_t i = 40; i < count; ++i) {
    REQUIRE_FALSE(statuses[i]);
    // Each names its own offset: the short one where it stopped, the rest where they begin.
    const std::uint64_t at = i == 40 ? limit : blocks.offset(i);
    CHECK(statuses[i].error().message.find("write at offset " + std::to_string(at)) != std::string::npos);
    CHECK(statuses[i].error().code == std::make_error_code(std::errc::file_too_large));
  }
  // Every write before the limit landed whole, the one across it up to the limit.
  const std::vector<char> written = read_file(path);
  REQUIRE(written.size() == limit);
  for (std::size_t i = 0; i < 40; ++i)
    CHECK(std::memcmp(written.data() + blocks.offset(i), blocks.at(i).data(), Scattered::block) == 0);
  CHECK(std::memcmp(written.data() + blocks.offset(40), blocks.at(40).data(), 1000) == 0);
}

TEST_CASE("page-cache writer: writes cancelled behind a failed one go again and report the real error, never a cancellation") {
  // EBADF for every write: the first in each chain fails, the rest read -ECANCELED and
  // go again, so each write reports the real error, never a cancellation.
  asio::io_context context(1);
  UniqueFd read_only(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(read_only);
  Scattered blocks(20);
  PageCacheWriter writer(context.get_executor(), FileRing::of(context.get_executor()), read_only.get(), 1);
  auto statuses = test::run(context, write_all_at_once(writer, blocks, 20));
  for (std::size_t i = 0; i < 20; ++i) {
    REQUIRE_FALSE(statuses[i]);
    CHECK(statuses[i].error().code == std::make_error_code(std::errc::bad_file_descriptor));
    CHECK(statuses[i].error().message.find("write at offset " + std::to_string(blocks.offset(i))) != std::string::npos);
  }
}
