#include <doctest/doctest.h>

#include "engine/copier.hpp"
#include "memory_endpoints.hpp"
#include "memory_stream.hpp"
#include "protocols/raw/raw_destination.hpp"
#include "protocols/raw/raw_receiver.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {

awaitable<Result<TransferStats>> copy_to(test::MemorySource& source, Destination& destination, bool prezeroed) {
  CopyOptions options;
  options.destination_is_zero = prezeroed;
  co_return co_await copy(source, destination, options);
}

}  // namespace

TEST_CASE("Raw destination: the image in order, holes and zeros as zero bytes, even when told --prezeroed") {
  const std::uint64_t size = (6u << 20) + 777;
  std::vector<Extent> map{{0, 1u << 20, ExtentKind::data},
                          {1u << 20, 3u << 20, ExtentKind::hole},
                          {4u << 20, 1u << 20, ExtentKind::zero},
                          {5u << 20, size - (5u << 20) - 1000, ExtentKind::data},
                          {size - 1000, 1000, ExtentKind::hole}};
  auto image = test::patterned(size, map);
  for (bool prezeroed : {false, true}) {
    CAPTURE(prezeroed);
    test::MemorySource source(image, map);
    auto memory = std::make_unique<test::MemoryStream>();
    auto* stream = memory.get();
    RawDestination destination(std::move(memory), size, "test");
    auto stats = test::run(copy_to(source, destination, prezeroed));
    REQUIRE(stats);
    CHECK(stream->sent == image);
    CHECK(stream->closed);
  }
}

TEST_CASE("Raw receiver: exactly the image's size, written in pieces; a short or a long stream is an error") {
  constexpr std::uint64_t size = (5u << 20) + 100;
  std::vector<std::byte> input(size);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = std::byte(static_cast<unsigned char>(i * 13 + 1));
  // The stream delivers `bytes` 100000 at a time, then ends.
  auto receive = [](std::vector<std::byte> bytes, test::CheckingSink& sink) {
    test::MemoryStream stream(std::move(bytes), 100000);
    StreamReader reader(stream);
    ReceiveOptions options;
    options.image_size = size;
    return test::run(receive_raw(reader, sink, options));
  };
  {
    test::CheckingSink sink(size);
    auto result = receive(input, sink);
    REQUIRE(result);
    CHECK(result->bytes_written == size);
    CHECK(sink.image == input);
    CHECK(sink.flushed);
  }
  {
    test::CheckingSink sink(size);
    auto result = receive(std::vector<std::byte>(input.begin(), input.begin() + 3000000), sink);
    REQUIRE_FALSE(result);
    CHECK(result.error().message == "the raw stream ended after 3000000 of " + std::to_string(size) + " bytes");
    CHECK(sink.image[2999999] == input[2999999]);  // what arrived was written
    CHECK_FALSE(sink.flushed);
  }
  {
    // One byte more than the image holds: the sender's image is larger.
    std::vector<std::byte> longer = input;
    longer.push_back(std::byte{1});
    test::CheckingSink sink(size);
    auto result = receive(longer, sink);
    REQUIRE_FALSE(result);
    CHECK(result.error().message.starts_with("the raw stream carries more than the image's " + std::to_string(size) +
                                             " bytes (--size)"));
    CHECK(sink.image == input);
    CHECK_FALSE(sink.flushed);
  }
}
