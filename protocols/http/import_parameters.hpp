// The parameters of an import request, as xapi reads them: from the query string and
// from cookies alike (`?chunked` and `cookie: chunked=true` mean the same thing).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/http/request_parser.hpp"

namespace sluice {

struct ImportParameter {
  std::string name;
  std::optional<std::string> value;  // absent for a bare `?chunked`
};

class ImportParameters {
 public:
  // Query parameters first (split at '&'), then every Cookie header (split at ';').
  static ImportParameters of(const HttpRequestHead& request);

  bool contains(std::string_view name) const;
  // The first value given for `name`; a bare name counts as the empty value.
  std::optional<std::string> find(std::string_view name) const;

 private:
  void add(std::string_view pair);
  std::vector<ImportParameter> parameters_;
};

}  // namespace sluice
