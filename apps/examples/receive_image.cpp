// The destination host's side of a migration, embedded: receive one Chunked image
// (what `sluice copy IMAGE tcp://...` or xen-api's vhd-tool sends) into a file or
// block device, print where it listens for the sender, and report progress.
//
//   receive_image LISTEN_URI OUTPUT [SIZE]
//
// LISTEN_URI may name port 0 (tcp://127.0.0.1:0): the port picked is printed on
// stdout as a URI, the line a toolstack would hand to the sending host.
#include <cstdio>
#include <cstdlib>

#include "apps/libsluice/sluice.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LISTEN_URI OUTPUT [SIZE]\n", argv[0]);
    return 2;
  }
  sluice::ReceiverOptions options;
  options.listen = argv[1];
  options.output = argv[2];
  if (argc > 3) {
    auto size = sluice::parse_size(argv[3]);
    if (!size) {
      std::fprintf(stderr, "bad size: %s\n", size.error().message.c_str());
      return 2;
    }
    options.size = *size;
  }
  options.once = true;  // one image, then return its result
  options.progress = [](const sluice::ReceiveProgress& p) {
    if (p.finished) return;
    const auto& u = p.update;
    std::fprintf(stderr, "\r%3.0f%%", u.total ? 100.0 * static_cast<double>(u.done) / static_cast<double>(u.total) : 100.0);
  };
  options.received = [](const sluice::ReceivedImage& image) {
    std::fprintf(stderr, "\nreceived %llu bytes from %s into %s in %.3f s\n",
                 static_cast<unsigned long long>(image.bytes_written), image.peer.c_str(), image.output.c_str(),
                 image.seconds);
  };

  auto result = sluice::receive_blocking(options, [](sluice::Receiver& receiver) {
    std::printf("%s\n", receiver.address().c_str());
    std::fflush(stdout);
  });
  if (!result) {
    std::fprintf(stderr, "\nreceive failed: %s\n", result.error().message.c_str());
    return 1;
  }
  return 0;
}
