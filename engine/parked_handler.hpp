// ParkedHandler: a suspended coroutine's completion handler, held behind a plain
// pointer so that an ordinary data structure can keep the coroutine and resume it
// later. Resuming posts the handler to its own executor, never runs it inline: nothing
// resumes inside whoever decided it should.
#pragma once

#include <memory>
#include <utility>

#include "engine/asio.hpp"

namespace sluice {

class ParkedHandler {
 public:
  virtual ~ParkedHandler() = default;
  // At most once.
  virtual void post() = 0;

  template <class Handler>
  static std::unique_ptr<ParkedHandler> park(Handler handler);
};

namespace detail {
template <class Handler>
class ParkedHandlerOf final : public ParkedHandler {
 public:
  explicit ParkedHandlerOf(Handler h) : handler_(std::move(h)) {}
  void post() override {
    auto ex = asio::get_associated_executor(handler_);
    asio::post(ex, std::move(handler_));
  }

 private:
  Handler handler_;
};
}  // namespace detail

template <class Handler>
std::unique_ptr<ParkedHandler> ParkedHandler::park(Handler handler) {
  return std::make_unique<detail::ParkedHandlerOf<Handler>>(std::move(handler));
}

}  // namespace sluice
