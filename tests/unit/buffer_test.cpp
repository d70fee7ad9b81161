#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

#include "engine/buffer.hpp"

using sluice::Buffer;

TEST_CASE("an allocated buffer is aligned and has its headroom in front") {
  Buffer b = Buffer::allocate(10000, 4096);
  CHECK(b.size() == 10000);
  CHECK(b.headroom() == 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data().data()) % 4096 == 0);
  auto prefix = b.prefix(12);
  CHECK(prefix.data() + 12 == b.data().data());
  auto whole = b.with_prefix(12);
  CHECK(whole.size() == 10012);
  CHECK(whole.data() == prefix.data());
}

TEST_CASE("shares keep the block alive and see the same bytes") {
  Buffer b = Buffer::allocate(8192, 4096);
  std::fill(b.data().begin(), b.data().end(), std::byte{7});
  Buffer tail = b.share(4096, 4096, 512);
  CHECK(b.references() == 2);
  CHECK(tail.size() == 4096);
  CHECK(tail.headroom() == 512);
  CHECK(tail.data().data() == b.data().data() + 4096);
  b = Buffer{};
  CHECK(tail.references() == 1);
  CHECK(tail.data()[0] == std::byte{7});
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
