// A minimal JSON object writer for the CLI's machine-readable output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::cli {

std::string json_escape(std::string_view text);

class JsonObject {
 public:
  JsonObject& add(std::string_view key, std::uint64_t value);
  JsonObject& add(std::string_view key, double value);
  JsonObject& add(std::string_view key, std::string_view value);
  JsonObject& add(std::string_view key, bool value);
  // `json` is inserted as is (a nested object or array).
  JsonObject& add_raw(std::string_view key, std::string_view json);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view name);
  std::string body_;
};

}  // namespace sluice::cli
