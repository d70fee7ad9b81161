// Receiving over NBD (`sluice serve --protocol nbd`): the configured files and devices
// as NBD exports.
#include <fcntl.h>

#include "apps/libsluice/receive_service.hpp"
#include "protocols/nbd/server/nbd_server.hpp"
#include "protocols/nbd/server/refusal.hpp"
#include "storage/file_facts.hpp"
#include "storage/file_image.hpp"

namespace sluice {

namespace {

std::string describe_export(const FileImage& image, bool read_only) {
  // The file's own name only: clients have no business learning the server's paths.
  std::string path = image.describe();
  auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return name + (image.is_block_device() ? " (block device" : " (raw image file") +
         (read_only ? ", read-only)" : ")");
}

}  // namespace

Result<ReceiveService> make_nbd_export_service(executor ex, const ReceiverOptions& options,
                                               const std::vector<UniqueFd>& device_claims) {
  nbd::ServerConfig config;
  config.zero_copy = options.zero_copy;
  for (std::size_t i = 0; i < options.exports.size(); ++i) {
    const ExportSpec& spec = options.exports[i];
    FileImageOptions image_options;
    image_options.read_only = options.read_only;
    image_options.direct = options.direct;
    if (i < device_claims.size() && device_claims[i]) image_options.shared_fd = device_claims[i].get();
    auto image = FileImage::open(ex, spec.path, image_options);
    if (!image) return fail(image.error().code, "export '" + spec.name + "': " + image.error().message);
    std::string description = describe_export(**image, options.read_only);
    config.exports.push_back(nbd::ServerExport{spec.name, std::move(description), std::move(*image)});
  }

  const bool credentials = !options.tls.certificate.empty() || !options.tls.psk_file.empty();
  if (credentials) {
    // Loaded under --tls=off too, which keeps the rest of the command line for A/B
    // runs: a mistyped key path must not go unnoticed until TLS is turned back on.
    auto tls = TlsContext::create(TlsRole::server, options.tls);
    if (!tls) return tl::unexpected(tls.error());
    if (options.tls_mode != "off") config.tls = *tls;
  }
  if (config.tls) {
    // Only two modes: TLS for everything (the spec's FORCEDTLS) or none. Allowing both
    // would let a man in the middle talk a client out of TLS.
    config.tls_required = true;
  }
  config.stream = options.stream;
  config.handshake_timeout = options.handshake_timeout;

  auto server = std::make_shared<nbd::NbdServer>(std::move(config));
  ReceiveService service;
  service.handler = [server](std::unique_ptr<Stream> stream, ServingGate& gate) {
    return server->serve(std::move(stream), gate);
  };
  service.negotiates = true;
  service.refuse = [](Stream& stream, const std::string& reason) { return nbd::refuse_client(stream, reason); };
  service.stop = [server] { server->stop(); };
  return service;
}

Result<std::vector<UniqueFd>> claim_export_devices(const ReceiverOptions& options) {
  std::vector<UniqueFd> claims(options.exports.size());
  if (options.read_only) return claims;
  for (std::size_t i = 0; i < options.exports.size(); ++i) {
    const ExportSpec& spec = options.exports[i];
    auto opened = open_image_file(spec.path, O_RDONLY);
    if (!opened) continue;  // FileImage::open says why, naming the export
    auto info = inspect_image_file(opened->get(), spec.path);
    if (!info || !info->block_device) continue;
    auto claimed = claim_block_device(spec.path, O_RDWR);
    if (!claimed) return fail(claimed.error().code, "export '" + spec.name + "': " + claimed.error().message);
    claims[i] = std::move(*claimed);
  }
  return claims;
}

}  // namespace sluice
