#include "protocols/http/headers.hpp"

#include <algorithm>

namespace sluice {

namespace {
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

void HttpHeaders::add(std::string name, std::string value) {
  fields_.push_back(HttpHeader{std::move(name), std::move(value)});
}

std::optional<std::string_view> HttpHeaders::find(std::string_view name) const {
  for (const HttpHeader& field : fields_)
    if (equals_ignoring_case(field.name, name)) return field.value;
  return std::nullopt;
}

}  // namespace sluice
