#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/buffer.hpp"
#include "skip.hpp"

using sluice::Buffer;

TEST_CASE("an allocated buffer is aligned and has its headroom in front") {
  Buffer b = Buffer::allocate(10000, 4096);
  CHECK(b.size() == 10000);
  CHECK(b.headroom() == 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(b.bytes().data()) % 4096 == 0);
  auto prefix = b.prefix(12);
  CHECK(prefix.data() + 12 == b.bytes().data());
  auto whole = b.with_prefix(12);
  CHECK(whole.size() == 10012);
  CHECK(whole.data() == prefix.data());
}

TEST_CASE("shares keep the block alive and see the same bytes") {
  Buffer b = Buffer::allocate(8192, 4096);
  std::fill(b.writable().begin(), b.writable().end(), std::byte{7});
  Buffer tail = b.share(4096, 4096, 512);
  CHECK(b.references() == 2);
  CHECK(tail.size() == 4096);
  CHECK(tail.headroom() == 512);
  CHECK(tail.bytes().data() == b.bytes().data() + 4096);
  b = Buffer{};
  CHECK(tail.references() == 1);
  CHECK(tail.bytes()[0] == std::byte{7});
}

TEST_CASE("a share never promises headroom that is not there") {
  Buffer b = Buffer::allocate(4096, 0);
  Buffer inner = b.share(100, 200, 4096);
  CHECK(inner.headroom() == 100);
}

TEST_CASE("moving a buffer transfers ownership") {
  Buffer a = Buffer::allocate(512);
  Buffer b = std::move(a);
  CHECK_FALSE(static_cast<bool>(a));
  CHECK(b.references() == 1);
  b.truncate(100);
  CHECK(b.size() == 100);
}

TEST_CASE("a borrowed buffer holds its lender until the last share is gone, and offers no headroom") {
  const std::vector<std::byte> lent(8192, std::byte{9});
  auto lender = std::make_shared<int>(0);
  std::weak_ptr<int> watch = lender;
  Buffer whole = Buffer::borrow(lent, std::move(lender));
  CHECK(whole.bytes().data() == lent.data());
  CHECK(whole.size() == 8192);
  CHECK(whole.headroom() == 0);
  // Zero detection would offer the zeros before a run as room for a header: not in
  // someone else's memory.
  Buffer run = whole.share(4096, 100, 4096);
  CHECK(run.headroom() == 0);
  CHECK(run.bytes().data() == lent.data() + 4096);
  whole = Buffer{};
  CHECK_FALSE(watch.expired());
  CHECK(run.bytes()[0] == std::byte{9});
  run = Buffer{};
  CHECK(watch.expired());
}

// The type says who may write: any holder may read, only a holder of a changeable
// handle may fill it or write a header in front of it.
template <class B>
concept fillable = requires(B& b) { b.writable(); };
template <class B>
concept headed = requires(B& b) { b.prefix(1); };
static_assert(std::is_same_v<decltype(std::declval<const Buffer&>().bytes()), std::span<const std::byte>>);
static_assert(std::is_same_v<decltype(std::declval<const Buffer&>().with_prefix(1)), std::span<const std::byte>>);
static_assert(fillable<Buffer> && !fillable<const Buffer>);
static_assert(headed<Buffer> && !headed<const Buffer>);

TEST_CASE("bytes() and writable() are the same window") {
  Buffer b = Buffer::allocate(4096);
  std::fill(b.writable().begin(), b.writable().end(), std::byte{3});
  CHECK(b.writable().data() == b.bytes().data());
  CHECK(b.writable().size() == b.bytes().size());
  CHECK(b.bytes()[4095] == std::byte{3});
  CHECK(Buffer{}.writable().empty());
}

TEST_CASE("a borrowed buffer refuses to be written" * doctest::test_suite("environment")) {
#ifdef NDEBUG
  sluice::test::skip_test("assertions are compiled out (NDEBUG)");
#else
  const std::vector<std::byte> lent(4096, std::byte{9});
  Buffer borrowed = Buffer::borrow(lent, std::make_shared<int>(0));
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(STDERR_FILENO);  // the assertion's message is expected
    (void)borrowed.writable();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
#endif
}
