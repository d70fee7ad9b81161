// The header fields of one HTTP message, looked up case-insensitively as RFC 9110
// requires (xapi sends "Transfer-encoding", others "Transfer-Encoding").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct HttpHeader {
  std::string name;   // as received
  std::string value;  // without surrounding whitespace
};

class HttpHeaders {
 public:
  void add(std::string name, std::string value);

  // The first field called `name`, whatever its case.
  std::optional<std::string_view> find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name).has_value(); }
  const std::vector<HttpHeader>& all() const { return fields_; }

 private:
  std::vector<HttpHeader> fields_;
};

bool equals_ignoring_case(std::string_view a, std::string_view b);

}  // namespace sluice
