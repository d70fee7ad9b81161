#include "apps/libsluice/transfer.hpp"

#include <sys/stat.h>

#include <optional>

#include "apps/libsluice/endpoints.hpp"
#include "engine/copier.hpp"

namespace sluice {

namespace {

// Copying a file onto itself would truncate the source before reading it.
Status refuse_same_file(std::string_view source, std::string_view destination) {
  std::string from = local_path(source);
  std::string to = local_path(destination);
  if (from.empty() || to.empty()) return Status{};
  struct stat a {}, b {};
  if (::stat(from.c_str(), &a) != 0 || ::stat(to.c_str(), &b) != 0) return Status{};
  if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    return fail(std::errc::invalid_argument, "the source and the destination are the same file");
  return Status{};
}

}  // namespace

Transfer::Transfer(std::string source, std::string destination, EndpointOptions endpoints,
                   CopyOptions copy)
    : source_(std::move(source)),
      destination_(std::move(destination)),
      endpoints_(std::move(endpoints)),
      copy_(std::move(copy)) {}

awaitable<Result<TransferStats>> Transfer::run() {
  if (Status same = refuse_same_file(source_, destination_); !same) co_return tl::unexpected(same.error());
  if (cancellation_.requested()) co_return fail(std::errc::operation_canceled, "the transfer was cancelled");
  auto source = co_await open_source(source_, endpoints_);
  if (!source) co_return tl::unexpected(source.error());
  auto destination = co_await open_destination(destination_, (*source)->size(), endpoints_);
  if (!destination) {
    co_await (*source)->close();
    co_return tl::unexpected(destination.error());
  }
  CopyOptions options = copy_;
  options.cancellation = &cancellation_;
  ProgressCallback user_callback = options.progress;
  progress_.total = (*source)->size();
  options.progress = [this, user_callback](const ProgressUpdate& update) {
    progress_ = update;
    if (user_callback) user_callback(update);
  };
  auto stats = co_await copy(**source, **destination, std::move(options));
  // Both ends are closed whatever happened: they may still run coroutines (NBD reply
  // readers) that must end before the objects go.
  Status destination_closed = co_await (*destination)->close();
  Status closed = co_await (*source)->close();
  if (!stats) co_return tl::unexpected(stats.error());
  if (!destination_closed) co_return tl::unexpected(destination_closed.error());
  if (!closed) co_return tl::unexpected(closed.error());
  co_return stats;
}

Result<TransferStats> transfer_blocking(std::string_view source, std::string_view destination,
                                        const EndpointOptions& endpoints, const CopyOptions& copy) {
  asio::io_context context(1);
  Transfer transfer{std::string(source), std::string(destination), endpoints, copy};
  std::optional<Result<TransferStats>> result;
  asio::co_spawn(context, transfer.run(), [&](std::exception_ptr error, Result<TransferStats> r) {
    if (error)
      result = fail(std::errc::io_error, "internal error in the transfer");
    else
      result = std::move(r);
  });
  context.run();
  if (!result) return fail(std::errc::io_error, "the transfer did not complete");
  return std::move(*result);
}

}  // namespace sluice
