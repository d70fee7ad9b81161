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

ProgressUpdate Transfer::progress() const {
  return ProgressUpdate{done_.load(), total_.load(), seconds_.load()};
}

awaitable<Result<TransferStats>> Transfer::run() {
  // Its progress, cancellation and endpoints' state belong to one run; a second one
  // on top (or after) would report a mix of both.
  if (started_.exchange(true))
    co_return fail(std::errc::operation_not_permitted, "this transfer has already run; a Transfer runs once");
  // The caller's own cancellation (CopyOptions::cancellation) stops this one too.
  Cancellation::Subscription chained;
  if (copy_.cancellation != nullptr)
    chained = copy_.cancellation->on_request(co_await asio::this_coro::executor, [this] { cancellation_.request(); });
  try {
    co_return co_await run_endpoints();
  } catch (const std::exception& e) {
    co_return fail(std::errc::io_error, std::string("internal error in the transfer: ") + e.what());
  } catch (...) {
    co_return fail(std::errc::io_error, "internal error in the transfer");
  }
}

// g++ 12 at -O2 inlines the small coroutines' ramps into this one and then mistakes
// Asio's frame allocator (operator new inside aligned_new) for a mismatch with the
// frame's operator delete, as in the NBD client unit tests. ASan builds check the real
// pairing at run time; clang does not warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
awaitable<Result<TransferStats>> Transfer::run_endpoints() {
  if (Status same = refuse_same_file(source_, destination_); !same) co_return tl::unexpected(same.error());
  if (cancellation_.requested() || (copy_.cancellation != nullptr && copy_.cancellation->requested()))
    co_return tl::unexpected(cancelled_error());
  EndpointOptions endpoints = endpoints_;
  endpoints.cancellation = &cancellation_;
  auto source = co_await open_source(source_, endpoints);
  if (!source) co_return tl::unexpected(source.error());
  // From here on both ends are closed whatever happens, a throw included: they may
  // still run coroutines (NBD reply readers) that must end before the objects go.
  std::exception_ptr thrown;
  Result<std::unique_ptr<Destination>> destination = fail(std::errc::io_error, "no destination");
  try {
    destination = co_await open_destination(destination_, (*source)->size(), endpoints);
  } catch (...) {
    thrown = std::current_exception();
  }
  if (thrown || !destination) {
    co_await (*source)->close();
    if (thrown) std::rethrow_exception(thrown);
    co_return tl::unexpected(destination.error());
  }
  CopyOptions options = copy_;
  options.cancellation = &cancellation_;
  ProgressCallback user_callback = options.progress;
  total_ = (*source)->size();
  options.progress = [this, user_callback](const ProgressUpdate& update) {
    done_ = update.done;
    seconds_ = update.seconds;
    if (user_callback) user_callback(update);
  };
  Result<TransferStats> stats = fail(std::errc::io_error, "no copy");
  try {
    stats = co_await copy(**source, **destination, std::move(options));
  } catch (...) {
    thrown = std::current_exception();
  }
  Status destination_closed = co_await (*destination)->close();
  Status closed = co_await (*source)->close();
  if (thrown) std::rethrow_exception(thrown);
  // A cancel whose requests outlast the grace period tears the endpoints down under
  // the copy, so what fails first can be a send into the socket just closed ("Broken
  // pipe ... the receiver closed the connection"): the cause is the cancel, and the
  // error says so.
  if ((!stats || !destination_closed || !closed) && cancellation_.requested())
    co_return tl::unexpected(cancelled_error());
  if (!stats) co_return tl::unexpected(stats.error());
  if (!destination_closed) co_return tl::unexpected(destination_closed.error());
  if (!closed) co_return tl::unexpected(closed.error());
  co_return stats;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

Result<TransferStats> run_blocking(Transfer& transfer) {
  try {
    asio::io_context context(1);
    std::optional<Result<TransferStats>> result;
    asio::co_spawn(context, transfer.run(), [&](std::exception_ptr thrown, Result<TransferStats> r) {
      // run() turns exceptions into errors; with one, `r` is a default (a success).
      result = thrown ? fail(std::errc::io_error, "internal error in the transfer") : std::move(r);
    });
    context.run();
    if (!result) return fail(std::errc::io_error, "the transfer did not complete");
    return std::move(*result);
  } catch (const std::exception& e) {
    return fail(std::errc::io_error, std::string("cannot run the transfer: ") + e.what());
  }
}

Result<TransferStats> transfer_blocking(std::string_view source, std::string_view destination,
                                        const EndpointOptions& endpoints, const CopyOptions& copy) {
  Transfer transfer{std::string(source), std::string(destination), endpoints, copy};
  return run_blocking(transfer);
}

}  // namespace sluice
