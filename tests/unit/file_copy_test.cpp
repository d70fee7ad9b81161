#include <doctest/doctest.h>

#include <sys/stat.h>

#include "engine/copier.hpp"
#include "run_loop.hpp"
#include "storage/file_destination.hpp"
#include "storage/file_source.hpp"
#include "storage/null_destination.hpp"
#include "temp_dir.hpp"

using namespace sluice;
using test::TempDir;

namespace {

Result<TransferStats> copy_file(const std::string& from, const std::string& to, FileOptions options = {},
                                CopyOptions copy_options = {}) {
  asio::io_context context(1);
  auto ex = context.get_executor();
  auto source = FileSource::open(ex, from, options);
  if (!source) return tl::unexpected(source.error());
  auto destination = FileDestination::open(ex, to, (*source)->size(), options);
  if (!destination) return tl::unexpected(destination.error());
  return test::run(context, copy(**source, **destination, copy_options));
}

void make_sparse_image(const std::string& path, std::uint64_t size) {
  const std::uint64_t mib = 1u << 20;
  test::set_size(path, size);
  test::write_at(path, 0, test::noise(4096, 1));              // data at the start
  test::write_at(path, 3 * mib + 512, test::noise(700000, 2));  // unaligned data in the middle
  test::write_at(path, 9 * mib, std::vector<char>(mib, 0));     // allocated zeros
  test::write_at(path, size - 333, test::noise(333, 3));       // data up to an unaligned end
}

}  // namespace

TEST_CASE("a sparse file copies byte for byte and stays sparse") {
  TempDir dir;
  const std::uint64_t size = (16u << 20) + 4096 + 333;
  make_sparse_image(dir.file("src.img"), size);
  auto stats = copy_file(dir.file("src.img"), dir.file("dst.img"));
  REQUIRE(stats);
  CHECK(test::slurp(dir.file("dst.img")) == test::slurp(dir.file("src.img")));
  // Holes stay holes, and the allocated zeros are found and skipped.
  CHECK(test::allocated(dir.file("dst.img")) <= test::allocated(dir.file("src.img")) - (1u << 20) + 65536);
  CHECK(stats->bytes_skipped >= (1u << 20));
}

TEST_CASE("O_DIRECT copies, including an unaligned tail") {
  TempDir dir;
  const std::uint64_t size = (4u << 20) + 333;
  make_sparse_image(dir.file("src.img"), size);
  FileOptions direct;
  direct.direct = true;
  auto stats = copy_file(dir.file("src.img"), dir.file("dst.img"), direct);
  REQUIRE(stats);
  CHECK(test::slurp(dir.file("dst.img")) == test::slurp(dir.file("src.img")));
}

TEST_CASE("an existing, larger destination file is replaced, not merged") {
  TempDir dir;
  test::write_at(dir.file("src.img"), 0, test::noise(10000, 5));
  test::write_at(dir.file("dst.img"), 0, test::noise(50000, 6));
  auto stats = copy_file(dir.file("src.img"), dir.file("dst.img"));
  REQUIRE(stats);
  CHECK(test::slurp(dir.file("dst.img")) == test::slurp(dir.file("src.img")));
}

TEST_CASE("an empty file copies to an empty file") {
  TempDir dir;
  test::set_size(dir.file("src.img"), 0);
  auto stats = copy_file(dir.file("src.img"), dir.file("dst.img"));
  REQUIRE(stats);
  struct stat st {};
  REQUIRE(::stat(dir.file("dst.img").c_str(), &st) == 0);
  CHECK(st.st_size == 0);
}

TEST_CASE("missing, unreadable and unsuitable sources fail clearly") {
  TempDir dir;
  asio::io_context context(1);
  auto missing = FileSource::open(context.get_executor(), dir.file("nope.img"), {});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == dir.file("nope.img") + ": No such file or directory");
  auto directory = FileSource::open(context.get_executor(), dir.path(), {});
  REQUIRE_FALSE(directory);
  CHECK(directory.error().message.find("not a regular file or block device") != std::string::npos);
  auto chardev = FileSource::open(context.get_executor(), "/dev/zero", {});
  REQUIRE_FALSE(chardev);
}

TEST_CASE("a source that shrinks during the copy is an error, not a short copy") {
  TempDir dir;
  const std::uint64_t size = 8u << 20;
  test::write_at(dir.file("src.img"), 0, test::noise(size, 9));
  asio::io_context context(1);
  auto source = FileSource::open(context.get_executor(), dir.file("src.img"), {});
  REQUIRE(source);
  ::truncate(dir.file("src.img").c_str(), 1u << 20);  // after the size was taken
  NullDestination sink;
  CopyOptions options;
  options.request_size = 1u << 20;
  auto stats = test::run(context, copy(**source, sink, options));
  REQUIRE_FALSE(stats);
  CHECK(stats.error().message.find("shrank") != std::string::npos);
}

TEST_CASE("null: reads all the data and keeps nothing") {
  TempDir dir;
  make_sparse_image(dir.file("src.img"), 12u << 20);
  asio::io_context context(1);
  auto source = FileSource::open(context.get_executor(), dir.file("src.img"), {});
  REQUIRE(source);
  NullDestination sink;
  auto stats = test::run(context, copy(**source, sink, {}));
  REQUIRE(stats);
  CHECK(stats->bytes_read >= 700000 + 4096 + 333);
  CHECK(stats->size == 12u << 20);
  // The allocated MiB of zeros is read like any data: null: keeps nothing, so finding
  // zeros would only cost a scan.
  CHECK(stats->bytes_written == stats->bytes_read);
  CHECK(stats->bytes_skipped == stats->size - stats->bytes_read);
}
