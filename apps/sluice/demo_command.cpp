#include "apps/sluice/demo_command.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "apps/libsluice/sluice.hpp"
#include "apps/sluice/option_table.hpp"
#include "apps/sluice/progress_reporter.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/unique_fd.hpp"

namespace sluice::cli {

namespace {

// Deterministic, fast, incompressible enough: xorshift64*.
struct Noise {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
};

constexpr std::size_t extent_size = 2u << 20;

// A sparse image: about one 2 MiB extent in eight holds random data, one in forty
// holds allocated zeros (written, so only zero detection can skip it); the rest,
// including the end, are holes.
// pwrite until done: a short write is retried, so a full disk is reported by its errno
// (ENOSPC) rather than as a count.
bool write_all(int fd, const void* bytes, std::size_t length, off_t offset) {
  const auto* p = static_cast<const std::byte*>(bytes);
  while (length > 0) {
    ssize_t n = ::pwrite(fd, p, length, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    p += n;
    length -= static_cast<std::size_t>(n);
    offset += n;
  }
  return true;
}

// O_EXCL: the demo never overwrites a file it did not make. `created` says whether
// there is now a file of the demo's to remove.
Status generate_image(const std::string& path, std::uint64_t size, bool& created) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) {
    const auto code = errno_code(errno);
    return fail(code, path + ": " + code.message() +
                          (code == std::errc::file_exists ? "; the demo does not overwrite files" : ""));
  }
  created = true;
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  std::vector<std::uint64_t> words(extent_size / 8);
  std::vector<std::byte> zeros(extent_size);
  Noise noise{0x5eed5eed5eedull};
  const std::uint64_t extents = size / extent_size;
  for (std::uint64_t i = 0; i + 1 < extents; ++i) {
    std::uint64_t roll = noise.next() % 40;
    const void* bytes = nullptr;
    std::size_t length = extent_size;
    if (roll < 5) {
      for (auto& w : words) w = noise.next();
      bytes = words.data();
      if (roll == 0) length = extent_size / 2 + 4096 * (noise.next() % 64);  // ragged extents too
    } else if (roll == 5) {
      bytes = zeros.data();
    } else {
      continue;
    }
    if (!write_all(fd.get(), bytes, length, static_cast<off_t>(i * extent_size)))
      return fail(errno_code(errno), path + ": cannot write the demo image: " + errno_code(errno).message());
  }
  return Status{};
}

Result<std::string> sha256_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<unsigned char> buffer(4u << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      EVP_MD_CTX_free(ctx);
      return fail(errno_code(errno), path + ": " + errno_code(errno).message());
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx, buffer.data(), static_cast<std::size_t>(n));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  char byte[3];
  for (unsigned i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

std::uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512 : 0;
}

}  // namespace

int demo_command(int argc, char** argv) {
  std::uint64_t size = 4ull << 30;
  bool keep = false;
  std::string dir;
  OptionTable table(
      "usage: sluice demo [--size SIZE] [--dir DIR] [--keep]\n\n"
      "Generates a sparse image (default 4G) with scattered random data, copies it\n"
      "with sluice's engine, verifies the copy's SHA-256 and prints the throughput.\n\n");
  table.add({{"size"}, Takes::value, "SIZE", "the image's size (default 4G, at least 2M)", [&size](const char* value) {
    auto parsed = parse_size(value);
    if (!parsed || *parsed < extent_size) throw UsageError("--size: give at least 2M");
    size = *parsed;
  }});
  table.add({{"dir"}, Takes::value, "DIR", "work here (default: a new directory under $TMPDIR)",
             [&dir](const char* value) { dir = value; }});
  table.add({{"keep"}, Takes::nothing, "", "keep both images afterwards", [&keep](const char*) { keep = true; }});
  if (auto operands = table.parse(argc, argv); !operands.empty())
    throw UsageError("demo takes no operands; unexpected argument '" + operands[0] + "'");
  // Only what the demo made is removed afterwards: its two images, and the directory
  // if the demo created it. Existing images in a given --dir are refused, not replaced.
  bool made_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/var/tmp") + "/sluice-demo.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "sluice: cannot create a work directory: %s\n", std::strerror(errno));
      return exit_transfer_error;
    }
    dir = pattern;
    made_dir = true;
  } else if (::mkdir(dir.c_str(), 0755) == 0) {
    made_dir = true;
  } else if (errno != EEXIST) {
    std::fprintf(stderr, "sluice: %s: %s\n", dir.c_str(), std::strerror(errno));
    return exit_transfer_error;
  }
  const std::string source = dir + "/source.img";
  const std::string copy = dir + "/copy.img";
  bool made_source = false;
  auto cleanup = [&] {
    if (keep) return;
    std::error_code ignored;
    if (made_source) {
      std::filesystem::remove(source, ignored);
      std::filesystem::remove(copy, ignored);
    }
    if (made_dir) std::filesystem::remove(dir, ignored);
  };
  struct stat existing {};
  if (::lstat(copy.c_str(), &existing) == 0) {
    std::fprintf(stderr, "sluice: %s already exists; the demo does not overwrite files\n", copy.c_str());
    cleanup();
    return exit_transfer_error;
  }

  std::printf("Generating a %s sparse image in %s ...\n", format_size(size).c_str(), dir.c_str());
  if (Status made = generate_image(source, size, made_source); !made) {
    std::fprintf(stderr, "sluice: %s\n", made.error().message.c_str());
    cleanup();
    return exit_transfer_error;
  }

  std::printf("Copying %s -> %s through the engine ...\n", source.c_str(), copy.c_str());
  ProgressReporter reporter(isatty(STDERR_FILENO) ? ProgressStyle::bar : ProgressStyle::none);
  CopyOptions options;
  options.progress = [&](const ProgressUpdate& u) { reporter.update(u); };
  auto stats = transfer_blocking(source, copy, EndpointOptions{}, options);
  if (stats) reporter.finish(ProgressUpdate{stats->size, stats->size, stats->seconds}, true);
  if (!stats) {
    std::fprintf(stderr, "sluice: %s\n", stats.error().message.c_str());
    cleanup();
    return exit_transfer_error;
  }

  std::printf("Verifying with SHA-256 ...\n");
  auto source_hash = std::async(std::launch::async, sha256_file, source);
  auto copy_hash = sha256_file(copy);
  auto original = source_hash.get();
  if (!original || !copy_hash) {
    std::fprintf(stderr, "sluice: %s\n", (!original ? original : copy_hash).error().message.c_str());
    cleanup();
    return exit_transfer_error;
  }
  const double mib = 1024.0 * 1024.0;
  std::printf("\n  virtual size   %s\n", format_size(stats->size).c_str());
  std::printf("  data copied    %s in %llu writes; %s of zeros skipped\n",
              format_size(stats->bytes_written).c_str(), static_cast<unsigned long long>(stats->writes),
              format_size(stats->bytes_skipped + stats->bytes_zeroed).c_str());
  std::printf("  allocated      source %s, copy %s\n", format_size(allocated_bytes(source)).c_str(),
              format_size(allocated_bytes(copy)).c_str());
  std::printf("  time           %.3f s\n", stats->seconds);
  std::printf("  throughput     %.0f MiB/s of image, %.0f MiB/s of data\n",
              static_cast<double>(stats->size) / mib / stats->seconds,
              static_cast<double>(stats->bytes_read) / mib / stats->seconds);
  std::printf("  sha256 source  %s\n  sha256 copy    %s\n", original->c_str(), copy_hash->c_str());
  bool same = *original == *copy_hash;
  std::printf("\n%s\n", same ? "OK: the copy is identical to the source."
                             : "FAILED: the copy differs from the source.");
  cleanup();
  return same ? exit_ok : exit_transfer_error;
}

}  // namespace sluice::cli
