#include "apps/libsluice/endpoints.hpp"

#include <fcntl.h>

#include <cctype>

#include "apps/libsluice/nbd_endpoints.hpp"
#include "apps/libsluice/stream_endpoints.hpp"
#include "engine/uri.hpp"
#include "storage/file_destination.hpp"
#include "storage/file_facts.hpp"
#include "storage/file_source.hpp"
#include "storage/null_destination.hpp"
#include "storage/vhd/vhd_detect.hpp"
#include "storage/vhd/vhd_source.hpp"

namespace sluice {

namespace {

tl::unexpected<Error> unsupported(std::string_view uri, std::string_view role) {
  return fail(std::errc::invalid_argument,
              "unsupported " + std::string(role) + " '" + std::string(uri) + "'");
}

// "vm:disk.img" is a file name, as cp and nbdcopy read it: text before a colon is a
// scheme only in the URI form "scheme://...", or for the two schemes that have no
// authority part, "null:" and "file:".
bool names_uri(std::string_view text) {
  if (!has_scheme(text)) return false;
  const auto colon = text.find(':');
  if (text.substr(colon + 1).starts_with("//")) return true;
  std::string scheme(text.substr(0, colon));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "null" || scheme == "file";
}

}  // namespace

std::string local_path(std::string_view text) {
  if (!names_uri(text)) return std::string(text);
  auto uri = parse_uri(text);
  // RFC 8089: file://HOST/path names HOST's file; only this machine's can be opened.
  if (uri && uri->scheme == "file" && (uri->host.empty() || uri->host == "localhost")) return uri->path;
  return {};
}

namespace {

tl::unexpected<Error> another_machine(std::string_view text) {
  return fail(std::errc::invalid_argument, "'" + std::string(text) +
                                               "' names a file on another machine; a local file is "
                                               "file:///PATH (or file://localhost/PATH)");
}

}  // namespace

bool uses_tls(std::string_view text) {
  if (!names_uri(text)) return false;
  auto uri = parse_uri(text);
  if (!uri) return false;
  return uri->scheme == "tls" || uri->scheme == "https" || uri->scheme == "nbds" || uri->scheme == "nbds+unix";
}

Status check_source(std::string_view text, const EndpointOptions& options) {
  if (!local_path(text).empty()) return {};
  if (options.source_format == SourceFormat::vhd)
    return fail(std::errc::invalid_argument,
                "'" + std::string(text) + "': --source-format vhd reads local files and block devices only");
  auto uri = parse_uri(text);
  if (!uri) return tl::unexpected(uri.error());
  if (uri->scheme == "file") return another_machine(text);
  if (is_nbd_uri(*uri, options)) return check_nbd_uri(*uri, options);
  if (uri->scheme == "null")
    return fail(std::errc::invalid_argument, "'" + std::string(text) + "' can only be a destination: it discards");
  if (is_stream_destination(*uri)) {
    const bool http = uri->scheme == "http" || uri->scheme == "https";
    return fail(std::errc::invalid_argument,
                "'" + std::string(text) + "' can only be a destination: Chunked and raw streams are " +
                    "received with `sluice serve`" +
                    (http ? "" : " (an NBD server there is a source with --protocol nbd)"));
  }
  return unsupported(text, "source");
}

Status check_destination(std::string_view text, const EndpointOptions& options) {
  if (!local_path(text).empty()) return {};
  auto uri = parse_uri(text);
  if (!uri) return tl::unexpected(uri.error());
  if (uri->scheme == "file") return another_machine(text);
  if (uri->scheme == "null") {
    if (text.size() != 5)
      return fail(std::errc::invalid_argument, "'" + std::string(text) + "': null: takes nothing after the colon");
    return {};
  }
  if (is_nbd_uri(*uri, options)) return check_nbd_uri(*uri, options);
  if (is_stream_destination(*uri)) return check_stream_destination(*uri, options);
  return unsupported(text, "destination");
}

namespace {

awaitable<Result<bool>> is_vhd(const std::string& path, SourceFormat format) {
  if (format != SourceFormat::automatic) co_return format == SourceFormat::vhd;
  auto fd = open_image_file(path, O_RDONLY);
  if (!fd) co_return tl::unexpected(fd.error());
  auto info = inspect_image_file(fd->get(), path);
  if (!info) co_return tl::unexpected(info.error());
  const executor ex = co_await asio::this_coro::executor;
  co_return co_await vhd::looks_like_vhd(FileRing::of(ex), fd->get(), info->size);
}

}  // namespace

awaitable<Result<std::unique_ptr<Source>>> open_source(std::string_view text,
                                                       const EndpointOptions& options) {
  if (Status ok = check_source(text, options); !ok) co_return tl::unexpected(ok.error());
  auto ex = co_await asio::this_coro::executor;
  if (std::string path = local_path(text); !path.empty()) {
    auto vhd = co_await is_vhd(path, options.source_format);
    if (!vhd) co_return tl::unexpected(vhd.error());
    if (*vhd) {
      auto source = VhdSource::open(ex, path, vhd::ChainOptions{options.vhd_path});
      if (!source) co_return tl::unexpected(source.error());
      co_return std::unique_ptr<Source>(std::move(*source));
    }
    auto source = FileSource::open(ex, path, options.file);
    if (!source) co_return tl::unexpected(source.error());
    co_return std::unique_ptr<Source>(std::move(*source));
  }
  auto uri = parse_uri(text);
  if (!uri) co_return tl::unexpected(uri.error());
  co_return co_await open_nbd_source(*uri, options);
}

awaitable<Result<std::unique_ptr<Destination>>> open_destination(std::string_view text,
                                                                 std::uint64_t size,
                                                                 const EndpointOptions& options) {
  if (Status ok = check_destination(text, options); !ok) co_return tl::unexpected(ok.error());
  auto ex = co_await asio::this_coro::executor;
  if (std::string path = local_path(text); !path.empty()) {
    auto destination = FileDestination::open(ex, path, size, options.file);
    if (!destination) co_return tl::unexpected(destination.error());
    co_return std::unique_ptr<Destination>(std::move(*destination));
  }
  auto uri = parse_uri(text);
  if (!uri) co_return tl::unexpected(uri.error());
  if (uri->scheme == "null") co_return std::unique_ptr<Destination>(std::make_unique<NullDestination>());
  if (is_nbd_uri(*uri, options)) co_return co_await open_nbd_destination(*uri, size, options);
  co_return co_await open_stream_destination(*uri, size, options);
}

}  // namespace sluice
