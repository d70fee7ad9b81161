#include "apps/sluice/json_writer.hpp"

#include <cstdio>

namespace sluice::cli {

std::string json_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void JsonObject::key(std::string_view name) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(name) + "\":";
}

JsonObject& JsonObject::add(std::string_view name, std::uint64_t value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, double value) {
  key(name);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  body_ += buf;
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, std::string_view value) {
  key(name);
  body_ += "\"" + json_escape(value) + "\"";
  return *this;
}

JsonObject& JsonObject::add(std::string_view name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add_raw(std::string_view name, std::string_view json) {
  key(name);
  body_ += json;
  return *this;
}

}  // namespace sluice::cli
