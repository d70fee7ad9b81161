#include "engine/size_parse.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace sluice {

Result<std::uint64_t> parse_size(std::string_view text) {
  auto bad = [&] { return fail(std::errc::invalid_argument, "invalid size '" + std::string(text) + "'"); };
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0) return bad();
  std::string_view number = text.substr(0, digits);
  std::string_view suffix = text.substr(digits);
  std::uint64_t multiplier = 1;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'B': multiplier = 1; break;
      case 'K': multiplier = 1ull << 10; break;
      case 'M': multiplier = 1ull << 20; break;
      case 'G': multiplier = 1ull << 30; break;
      case 'T': multiplier = 1ull << 40; break;
      case 'P': multiplier = 1ull << 50; break;
      case 'E': multiplier = 1ull << 60; break;
      default: return bad();
    }
    std::string_view rest = suffix.substr(1);
    if (multiplier != 1 && (rest == "iB" || rest == "ib" || rest == "B" || rest == "b")) rest = {};
    if (!rest.empty()) return bad();
  }
  if (number.find('.') == std::string_view::npos) {
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc{} || end != number.data() + number.size()) return bad();
    if (value > std::numeric_limits<std::uint64_t>::max() / multiplier)
      return fail(std::errc::result_out_of_range, "size '" + std::string(text) + "' is too large");
    return value * multiplier;
  }
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc{} || end != number.data() + number.size()) return bad();
  double bytes = value * static_cast<double>(multiplier);
  if (bytes >= 18446744073709551615.0)
    return fail(std::errc::result_out_of_range, "size '" + std::string(text) + "' is too large");
  if (bytes != std::floor(bytes)) return bad();  // fractions of a byte make no sense
  return static_cast<std::uint64_t>(bytes);
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace sluice
