#include "protocols/http/import_request.hpp"

#include <algorithm>

#include "protocols/http/base64.hpp"
#include "protocols/http/message_head.hpp"

namespace sluice {

namespace {

bool is_visible_ascii(char c) { return c > 0x20 && c < 0x7f; }

bool is_header_value_char(char c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

Result<std::string> build_import_request(const Uri& uri, const ImportRequestOptions& options) {
  auto refuse = [](const std::string& why) {
    return fail(std::errc::invalid_argument, "cannot build the HTTP import request: " + why);
  };
  const std::string host = uri.authority();
  if (uri.host.empty()) return refuse("the URI has no host");
  if (!std::all_of(host.begin(), host.end(), is_visible_ascii))
    return refuse("the host '" + quote_for_message(host) + "' has spaces or control characters");

  std::string target = uri.raw_path.empty() ? "/" : uri.raw_path;
  if (!uri.raw_query.empty()) target += "?" + uri.raw_query;
  if (!std::all_of(target.begin(), target.end(), is_visible_ascii))
    return refuse("the path '" + quote_for_message(target) +
                  "' has spaces or control characters (percent-encode them)");
  const std::string& agent = options.user_agent;
  if (agent.empty() || !std::all_of(agent.begin(), agent.end(), is_header_value_char))
    return refuse("the user agent '" + quote_for_message(agent) + "' is empty or has control characters");

  std::string request = "PUT " + target + " HTTP/1.1\r\n";
  request += "host: " + host + "\r\n";
  request += "user-agent: " + agent + "\r\n";
  if (options.chunked) request += "cookie: chunked=true\r\n";
  if (!uri.user.empty() || !uri.password.empty())
    request += "authorization: Basic " + base64_encode(uri.user + ":" + uri.password) + "\r\n";
  request += "\r\n";
  return request;
}

}  // namespace sluice
