#include "protocols/http/import_parameters.hpp"

namespace sluice {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

template <class Each>
void split(std::string_view text, char separator, Each each) {
  while (!text.empty()) {
    const std::size_t end = text.find(separator);
    each(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

}  // namespace

void ImportParameters::add(std::string_view pair) {
  pair = trim(pair);
  if (pair.empty()) return;
  const std::size_t equals = pair.find('=');
  ImportParameter parameter{std::string(trim(pair.substr(0, equals))), std::nullopt};
  if (equals != std::string_view::npos) parameter.value = std::string(trim(pair.substr(equals + 1)));
  parameters_.push_back(std::move(parameter));
}

ImportParameters ImportParameters::of(const HttpRequestHead& request) {
  ImportParameters out;
  split(request.query(), '&', [&](std::string_view pair) { out.add(pair); });
  for (const HttpHeader& header : request.headers.all())
    if (equals_ignoring_case(header.name, "Cookie"))
      split(header.value, ';', [&](std::string_view pair) { out.add(pair); });
  return out;
}

bool ImportParameters::contains(std::string_view name) const { return find(name).has_value(); }

std::optional<std::string> ImportParameters::find(std::string_view name) const {
  for (const ImportParameter& parameter : parameters_)
    if (parameter.name == name) return parameter.value.value_or("");
  return std::nullopt;
}

}  // namespace sluice
