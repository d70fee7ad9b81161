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
#include "storage/vhd/vhd_source.hpp"

namespace sluice::cli {

namespace {

// One file of a VHD chain, as `info` shows it.
struct VhdFileInfo {
  std::string path;
  std::string type;
  std::string creator;
  std::string uid;
  std::uint64_t size = 0;
  std::uint64_t block_size = 0;  // 0 for a fixed disk
  std::uint64_t blocks = 0;
  std::uint64_t allocated_blocks = 0;
};

struct ImageInfo {
  std::string name;
  std::string format;
  std::uint64_t size = 0;
  std::uint64_t allocated = 0;
  std::vector<Extent> extents;
  std::vector<VhdFileInfo> vhd_chain;  // the child first; empty unless a VHD
};

std::vector<VhdFileInfo> vhd_chain_of(const Source& source) {
  std::vector<VhdFileInfo> out;
  const auto* vhd_source = dynamic_cast<const VhdSource*>(&source);
  if (!vhd_source) return out;
  for (const vhd::Member& m : vhd_source->chain().members)
    out.push_back({m.path, vhd::to_string(m.footer.disk_type), m.footer.creator, vhd::to_string(m.footer.uid),
                   m.size(), m.block_size(), m.bat.size(), m.allocated_blocks});
  return out;
}

std::string vhd_chain_json(const std::vector<VhdFileInfo>& chain) {
  std::string out = "[";
  for (const VhdFileInfo& f : chain) {
    if (out.size() > 1) out += ",";
    JsonObject item;
    item.add("path", f.path).add("type", f.type).add("creator", f.creator).add("uid", f.uid).add("size", f.size);
    if (f.block_size) item.add("block_size", f.block_size).add("blocks", f.blocks).add("allocated_blocks", f.allocated_blocks);
    out += item.str();
  }
  return out + "]";
}

void print_vhd_chain(const std::vector<VhdFileInfo>& chain) {
  const VhdFileInfo& top = chain.front();
  std::printf("vhd type:  %s\ncreator:   '%s'\n", top.type.c_str(), printable(top.creator).c_str());
  if (top.block_size)
    std::printf("block size: %llu\nallocated blocks: %llu of %llu\n", static_cast<unsigned long long>(top.block_size),
                static_cast<unsigned long long>(top.allocated_blocks), static_cast<unsigned long long>(top.blocks));
  std::printf("chain:     %zu file%s\n", chain.size(), chain.size() == 1 ? "" : "s");
  for (const VhdFileInfo& f : chain) {
    std::printf("  %s  %s  creator '%s'  uid %s  size %llu", printable(f.path).c_str(), f.type.c_str(),
                printable(f.creator).c_str(), f.uid.c_str(), static_cast<unsigned long long>(f.size));
    if (f.block_size)
      std::printf("  block size %llu  allocated blocks %llu of %llu", static_cast<unsigned long long>(f.block_size),
                  static_cast<unsigned long long>(f.allocated_blocks), static_cast<unsigned long long>(f.blocks));
    std::printf("\n");
  }
}

awaitable<Result<ImageInfo>> map_source(Source& source) {
  ImageInfo info{source.describe(), source.format(), source.size(), 0, {}, vhd_chain_of(source)};
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
        .add("allocated", info.allocated);
    if (!info.vhd_chain.empty()) {
      const VhdFileInfo& top = info.vhd_chain.front();
      JsonObject vhd;
      vhd.add("type", top.type).add("creator", top.creator);
      if (top.block_size) vhd.add("block_size", top.block_size).add("blocks", top.blocks).add("allocated_blocks", top.allocated_blocks);
      vhd.add_raw("chain", vhd_chain_json(info.vhd_chain));
      out.add_raw("vhd", vhd.str());
    }
    out.add_raw("extents", extents);
    std::printf("%s\n", out.str().c_str());
    return exit_ok;
  }
  std::printf("source:    %s\nformat:    %s\nsize:      %llu (%s)\nallocated: %llu (%s)\nextents:   %zu\n",
              printable(info.name).c_str(), info.format.c_str(), static_cast<unsigned long long>(info.size),
              format_size(info.size).c_str(), static_cast<unsigned long long>(info.allocated),
              format_size(info.allocated).c_str(), info.extents.size());
  if (!info.vhd_chain.empty()) print_vhd_chain(info.vhd_chain);
  std::printf("%20s %20s  %s\n", "offset", "length", "type");
  for (const Extent& e : info.extents)
    std::printf("%20llu %20llu  %s\n", static_cast<unsigned long long>(e.offset),
                static_cast<unsigned long long>(e.length), std::string(to_string(e.kind)).c_str());
  return exit_ok;
}

}  // namespace sluice::cli
