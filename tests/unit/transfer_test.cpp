// The embedding API as a toolstack uses it: sluice::Transfer and transfer_blocking.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "apps/libsluice/sluice.hpp"
#include "tests/unit/run_loop.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace sluice;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// 3 MiB with data at 1 MiB and a tail past the last hole.
void make_image(const std::string& path) {
  test::write_at(path, 1 << 20, std::vector<char>(300000, 'x'));
  test::write_at(path, (3 << 20) - 5, std::vector<char>{'t', 'a', 'i', 'l', '!'});
}

}  // namespace

TEST_CASE("Transfer: copies, reports completed progress, and runs once") {
  test::TempDir dir;
  make_image(dir.file("src.img"));
  Transfer transfer(dir.file("src.img"), dir.file("dst.img"));
  auto stats = test::run(transfer.run());
  REQUIRE(stats);
  CHECK(contents(dir.file("dst.img")) == contents(dir.file("src.img")));
  CHECK(transfer.progress().done == 3u << 20);
  CHECK(transfer.progress().total == 3u << 20);

  // Again: refused, and the destination is left as the first run made it.
  test::write_at(dir.file("src.img"), 0, std::vector<char>(4096, 'n'));
  auto again = test::run(transfer.run());
  REQUIRE_FALSE(again);
  CHECK(again.error().message == "this transfer has already run; a Transfer runs once");
  CHECK(contents(dir.file("dst.img"))[0] == '\0');
}

TEST_CASE("Transfer: cancelled before it runs, it opens nothing") {
  test::TempDir dir;
  make_image(dir.file("src.img"));
  Transfer transfer(dir.file("src.img"), dir.file("dst.img"));
  transfer.cancel();
  auto stats = test::run(transfer.run());
  REQUIRE_FALSE(stats);
  CHECK(stats.error().message == "the transfer was cancelled");
  CHECK_FALSE(std::filesystem::exists(dir.file("dst.img")));
}

TEST_CASE("transfer_blocking: copies on the calling thread; a cancellation from another thread stops it") {
  test::TempDir dir;
  make_image(dir.file("src.img"));
  auto stats = transfer_blocking(dir.file("src.img"), dir.file("dst.img"));
  REQUIRE(stats);
  CHECK(contents(dir.file("dst.img")) == contents(dir.file("src.img")));

  Cancellation cancellation;
  CopyOptions copy;
  copy.cancellation = &cancellation;
  std::thread other([&] { cancellation.request(); });
  other.join();
  auto cancelled = transfer_blocking(dir.file("src.img"), dir.file("dst2.img"), {}, copy);
  REQUIRE_FALSE(cancelled);
  CHECK(cancelled.error().message == "the transfer was cancelled");
}

TEST_CASE("Transfer: a bad URI or a missing source is an error, not an exception") {
  test::TempDir dir;
  Transfer missing(dir.file("nope.img"), dir.file("dst.img"));
  auto a = test::run(missing.run());
  REQUIRE_FALSE(a);
  CHECK(a.error().message.find("nope.img") != std::string::npos);
  Transfer bad_scheme("gopher://x/y", dir.file("dst.img"));
  auto b = test::run(bad_scheme.run());
  REQUIRE_FALSE(b);
  CHECK(b.error().message == "unsupported source 'gopher://x/y'");
}

TEST_CASE("check_source and check_destination: the caller's mistakes, found without opening anything") {
  test::TempDir dir;
  const EndpointOptions options;
  CHECK(check_source(dir.file("missing.img"), options));  // a path is opened later
  CHECK(check_source("nbd://192.0.2.1/export", options));
  CHECK(check_destination("null:", options));
  CHECK(check_destination("tcp://192.0.2.1:1", options));
  CHECK(check_destination("vm:disk.img", options));  // a file name with a colon

  auto expect = [](const Status& status, std::string_view message) {
    REQUIRE_FALSE(status);
    CHECK(status.error().code == std::make_error_code(std::errc::invalid_argument));
    CHECK(status.error().message == message);
  };
  expect(check_source("gopher://x/y", options), "unsupported source 'gopher://x/y'");
  expect(check_source("nbd+unix:///", options), "NBD URI nbd+unix://...: needs ?socket=PATH");
  expect(check_destination("null:x", options), "'null:x': null: takes nothing after the colon");
  expect(check_destination("tcp://host", options), "tcp://host needs a port: tcp://HOST:PORT");
  expect(check_destination("nbd://[::1", options), "invalid URI 'nbd://[::1': unterminated IPv6 address");
  EndpointOptions nbd_over_http;
  nbd_over_http.protocol = "nbd";
  expect(check_destination("http://host/import", nbd_over_http),
         "http://: --protocol nbd is not available here (use nbds:// for NBD over TLS)");
  // No file was touched by any of it.
  CHECK_FALSE(std::filesystem::exists(dir.file("missing.img")));
}
