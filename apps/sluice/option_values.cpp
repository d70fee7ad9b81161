#include "apps/sluice/option_values.hpp"

#include <charconv>
#include <cstring>
#include <string>

#include "apps/sluice/usage_error.hpp"
#include "engine/size_parse.hpp"

namespace sluice::cli {

std::uint64_t size_argument(const char* name, const char* text) {
  auto value = parse_size(text);
  if (!value) throw UsageError(std::string("--") + name + ": " + value.error().message);
  return *value;
}

std::uint64_t count_argument(const char* name, const char* text) {
  std::uint64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [stop, ec] = std::from_chars(text, end, value);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(std::string("--") + name + ": '" + text + "' is too large");
  if (ec != std::errc{} || stop != end || stop == text)
    throw UsageError(std::string("--") + name + ": '" + text + "' is not a whole number");
  return value;
}

std::uint64_t count_between(const char* name, const char* text, std::uint64_t low, std::uint64_t high) {
  const std::uint64_t value = count_argument(name, text);
  if (value < low || value > high)
    throw UsageError(std::string("--") + name + " must be between " + std::to_string(low) + " and " +
                     std::to_string(high));
  return value;
}

std::chrono::seconds seconds_argument(const char* name, const char* text) {
  const std::uint64_t value = count_argument(name, text);
  if (value > max_seconds_argument)
    throw UsageError(std::string("--") + name + ": '" + text + "' is too large (at most " +
                     std::to_string(max_seconds_argument) + " seconds)");
  return std::chrono::seconds(static_cast<std::chrono::seconds::rep>(value));
}

}  // namespace sluice::cli
