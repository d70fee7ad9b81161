// A mistake on the command line: reported with a hint, exit status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace sluice::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int exit_ok = 0;
constexpr int exit_transfer_error = 1;
constexpr int exit_usage = 2;

}  // namespace sluice::cli
