// sluice: move disk images. Subcommands: copy, info, serve, demo.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "apps/sluice/copy_command.hpp"
#include "apps/sluice/demo_command.hpp"
#include "apps/sluice/info_command.hpp"
#include "apps/sluice/serve_command.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace {

void usage(std::FILE* out) {
  std::fputs(
      "usage: sluice COMMAND [options] ...\n"
      "\n"
      "  copy [options] SOURCE DESTINATION   copy a disk image (sluice copy --help)\n"
      "  info [--json] SOURCE                size, allocation and extent map\n"
      "  serve --listen URI [options]        receive images (sluice serve --help)\n"
      "  demo [--size SIZE] [--keep]         copy a generated sparse image and verify it\n"
      "  --help, --version\n",
      out);
}

// Each NBD connection the server holds, and each spliced request, holds descriptors
// (a socket, pipes): the usual soft limit of 1024 is reached by a few dozen busy
// clients. The hard limit is the administrator's; nothing here uses select(), whose
// sets stop at 1024, so the soft limit may go up to it.
void raise_descriptor_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);  // a refusal leaves the old limit, which works
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice::cli;
  // A write past `ulimit -f` would kill the process without a word; ignored, it fails
  // with EFBIG and the copy reports it like any other write error.
  std::signal(SIGXFSZ, SIG_IGN);
  // A closed progress or stats reader (stdout piped to one that exited) would kill the
  // process mid-copy; ignored, the write fails with EPIPE and only the display stops.
  // Sockets are written with MSG_NOSIGNAL anyway.
  std::signal(SIGPIPE, SIG_IGN);
  raise_descriptor_limit();
  if (argc < 2) {
    usage(stderr);
    return exit_usage;
  }
  std::string_view command = argv[1];
  try {
    if (command == "--help" || command == "-h" || command == "help") {
      usage(stdout);
      return exit_ok;
    }
    if (command == "--version") {
      std::printf("sluice %s\n", SLUICE_VERSION);
      return exit_ok;
    }
    if (command == "copy") return copy_command(argc - 1, argv + 1);
    if (command == "info") return info_command(argc - 1, argv + 1);
    if (command == "demo") return demo_command(argc - 1, argv + 1);
    if (command == "serve") return serve_command(argc - 1, argv + 1);
    throw UsageError("unknown command '" + std::string(command) + "'");
  } catch (const UsageError& e) {
    const bool has_own_help = command == "copy" || command == "info" || command == "serve" || command == "demo";
    std::fprintf(stderr, "sluice: %s\nTry 'sluice %s--help'.\n", sluice::printable(e.what()).c_str(),
                 has_own_help ? (std::string(command) + " ").c_str() : "");
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", e.what());
    return exit_transfer_error;
  }
}
