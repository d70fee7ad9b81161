#include <doctest/doctest.h>

#include <sys/ioctl.h>

#include <cstddef>
#include <vector>

#include "engine/uring/pipe.hpp"
#include "run_loop.hpp"
#include "storage/null_destination.hpp"

using namespace sluice;

namespace {

int bytes_waiting(int pipe_read_end) {
  int n = -1;
  REQUIRE(::ioctl(pipe_read_end, FIONREAD, &n) == 0);
  return n;
}

}  // namespace

// A receiver hands its pipe back to the pool after each payload and the next payload
// is spliced in behind whatever is left: a drain that leaves bytes would put old data
// under a new offset.
TEST_CASE("null: drains a spliced payload completely, pipe after pipe") {
  auto pipe = Pipe::create();
  REQUIRE(pipe);
  NullDestination sink;
  REQUIRE(sink.traits().takes_pipes);
  for (std::size_t length : {std::size_t{1}, std::size_t{4096}, pipe->capacity()}) {
    std::vector<std::byte> payload(length, std::byte{0x5a});
    REQUIRE(pipe->put(payload));
    REQUIRE(bytes_waiting(pipe->read_end()) == static_cast<int>(length));
    Status s = test::run(sink.write_from_pipe(0, length, pipe->read_end()));
    CHECK(s.has_value());
    CHECK(bytes_waiting(pipe->read_end()) == 0);
  }
}

TEST_CASE("null: a pipe holding less than promised is an error, not a hang") {
  auto pipe = Pipe::create();
  REQUIRE(pipe);
  NullDestination sink;
  std::vector<std::byte> payload(100, std::byte{1});
  REQUIRE(pipe->put(payload));
  // The write end stays open, so a blocking splice would wait for the missing bytes.
  Status s = test::run(sink.write_from_pipe(8192, 200, pipe->read_end()));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().message.find("8292") != std::string::npos);  // where the bytes ran out
}
