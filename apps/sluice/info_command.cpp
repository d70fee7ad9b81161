#include "apps/sluice/info_command.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/libsluice/sluice.hpp"
#include "apps/sluice/endpoint_flags.hpp"
#include "apps/sluice/option_table.hpp"
#include "apps/sluice/json_writer.hpp"
#include "apps/sluice/usage_error.hpp"
#include "engine/printable.hpp"

namespace sluice::cli {

namespace {

struct ImageInfo {
  std::string name;
  std::string format;
  std::uint64_t size = 0;
  std::uint64_t allocated = 0;
  std::vector<Extent> extents;
};

awaitable<Result<ImageInfo>> map_source(Source& source) {
  ImageInfo info{source.describe(), source.format(), source.size(), 0, {}};
  std::uint64_t offset = 0;
  while (offset < info.size) {
    auto extents = co_await source.extents(offset, info.size - offset);
    if (!extents) co_return tl::unexpected(extents.error());
    if (extents->empty()) co_return fail_at("reading the extent map", offset, std::make_error_code(std::errc::protocol_error));
    for (Extent e : *extents) {
      if (offset >= info.size) break;
      e.length = std::min(e.end(), info.size) - e.offset;
      offset = e.end();
      if (e.kind != ExtentKind::hole) info.allocated += e.length;
      if (!info.extents.empty() && info.extents.back().kind == e.kind && info.extents.back().end() == e.offset)
        info.extents.back().length += e.length;
      else
        info.extents.push_back(e);
    }
  }
  co_return info;
}

// `options` by value: the coroutine must own what it uses across its co_awaits.
awaitable<Result<ImageInfo>> gather(std::string uri, EndpointOptions options) {
  auto source = co_await open_source(uri, options);
  if (!source) co_return tl::unexpected(source.error());
  auto info = co_await map_source(**source);
  // Closed on every path: an NBD source runs a reply reader until then.
  co_await (*source)->close();
  co_return info;
}

}  // namespace

int info_command(int argc, char** argv) {
  bool json = false;
  EndpointOptions endpoints;
  endpoints.connections = 1;  // reading a map needs no second connection unless asked
  OptionTable table(
      "usage: sluice info [--json] [options] SOURCE\n\n"
      "Prints the image's size, format, allocated bytes and extent map. SOURCE is\n"
      "anything `sluice copy` reads; the options say how to reach it:\n\n");
  table.add({{"json"}, Takes::nothing, "", "print one JSON object", [&json](const char*) { json = true; }});
  table.add(endpoint_flags(endpoints));
  const std::vector<std::string> operands = table.parse(argc, argv);
  if (operands.size() > 1) throw UsageError("info takes one SOURCE; unexpected argument '" + operands[1] + "'");
  if (operands.empty()) throw UsageError("info needs a SOURCE");
  const std::string uri = operands[0];
  if (uri.empty()) throw UsageError("SOURCE must not be empty");
  if (Status ok = check_source(uri, endpoints); !ok) throw UsageError(ok.error().message);
  check_tls_flags_used(endpoints, {uri});

  asio::io_context context(1);
  std::optional<Result<ImageInfo>> result;
  asio::co_spawn(context, gather(uri, endpoints), [&](std::exception_ptr e, Result<ImageInfo> r) {
    result = e ? fail(std::errc::io_error, "internal error") : std::move(r);
  });
  context.run();
  if (!result || !*result) {
    std::fprintf(stderr, "sluice: %s\n", printable(result ? (*result).error().message : "no result").c_str());
    return exit_transfer_error;
  }
  const ImageInfo& info = **result;
  if (json) {
    std::string extents = "[";
    for (const Extent& e : info.extents) {
      if (extents.size() > 1) extents += ",";
      JsonObject item;
      item.add("offset", e.offset).add("length", e.length).add("type", to_string(e.kind));
      extents += item.str();
    }
    extents += "]";
    JsonObject out;
    out.add("source", info.name)
        .add("format", info.format)
        .add("size", info.size)
        .add("allocated", info.allocated)
        .add_raw("extents", extents);
    std::printf("%s\n", out.str().c_str());
    return exit_ok;
  }
  std::printf("source:    %s\nformat:    %s\nsize:      %llu (%s)\nallocated: %llu (%s)\nextents:   %zu\n",
              printable(info.name).c_str(), info.format.c_str(), static_cast<unsigned long long>(info.size),
              format_size(info.size).c_str(), static_cast<unsigned long long>(info.allocated),
              format_size(info.allocated).c_str(), info.extents.size());
  std::printf("%20s %20s  %s\n", "offset", "length", "type");
  for (const Extent& e : info.extents)
    std::printf("%20llu %20llu  %s\n", static_cast<unsigned long long>(e.offset),
                static_cast<unsigned long long>(e.length), std::string(to_string(e.kind)).c_str());
  return exit_ok;
}

}  // namespace sluice::cli
