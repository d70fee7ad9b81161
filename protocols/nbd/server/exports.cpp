#include "protocols/nbd/server/exports.hpp"

#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

const ServerExport* find_export(const ServerConfig& config, std::string_view name) {
  for (const ServerExport& e : config.exports)
    if (e.name == name) return &e;
  if (name.empty() && !config.exports.empty()) return &config.exports.front();
  return nullptr;
}

std::uint16_t transmission_flags(const ImageTraits& image, bool structured_replies) {
  using namespace transmission_flag;
  // FLUSH and FUA work on every image (on a read-only one they have nothing to do);
  // CACHE is a readahead hint that always succeeds.
  std::uint16_t flags = has_flags | send_flush | send_fua | send_cache;
  if (image.read_only) {
    flags |= read_only;
  } else {
    // Zeroing falls back to writing zeros, so it always works; FAST_ZERO requests are
    // answered quickly either way (done by fallocate, or refused with ENOTSUP).
    flags |= send_write_zeroes | send_fast_zero;
    if (image.can_trim) flags |= send_trim;
  }
  if (image.rotational) flags |= rotational;
  // DF asks for a read in one chunk; it only means something with structured replies.
  if (structured_replies) flags |= send_df;
  // Several connections may share the export only if a flush on any of them covers
  // the writes of all (see ImageTraits::flush_covers_all; true for files and devices).
  if (image.flush_covers_all) flags |= can_multi_conn;
  return flags;
}

}  // namespace sluice::nbd
