#include <doctest/doctest.h>

#include "engine/uri.hpp"
#include "protocols/http/import_request.hpp"
#include "protocols/http/request_parser.hpp"

using namespace sluice;

namespace {

std::string request_for(std::string_view text, const ImportRequestOptions& options = {}) {
  auto uri = parse_uri(text);
  REQUIRE(uri);
  auto request = build_import_request(*uri, options);
  REQUIRE(request);
  return *request;
}

std::string refusal_for(std::string_view text, const ImportRequestOptions& options = {}) {
  auto uri = parse_uri(text);
  REQUIRE(uri);
  auto request = build_import_request(*uri, options);
  REQUIRE_FALSE(request);
  CHECK((request.error().code == std::errc::invalid_argument));
  return request.error().message;
}

}  // namespace

TEST_CASE("the import request as vhd-tool sends it: no Content-Length, no Transfer-Encoding") {
  CHECK(request_for("https://10.0.0.2/import_raw_vdi?vdi=OpaqueRef%3Aab&session_id=OpaqueRef%3Acd") ==
        "PUT /import_raw_vdi?vdi=OpaqueRef%3Aab&session_id=OpaqueRef%3Acd HTTP/1.1\r\n"
        "host: 10.0.0.2\r\n"
        "user-agent: sluice\r\n"
        "cookie: chunked=true\r\n"
        "\r\n");
}

TEST_CASE("user information becomes Basic authorization") {
  CHECK(request_for("http://root:secret@xcp-host:8080/services/SM/data/sr/vdi") ==
        "PUT /services/SM/data/sr/vdi HTTP/1.1\r\n"
        "host: xcp-host:8080\r\n"
        "user-agent: sluice\r\n"
        "cookie: chunked=true\r\n"
        "authorization: Basic cm9vdDpzZWNyZXQ=\r\n"
        "\r\n");
  // Percent-decoded before encoding; the first colon separates user and password.
  CHECK(request_for("http://alice:p%40ss:word@h/").find("authorization: Basic YWxpY2U6cEBzczp3b3Jk\r\n") !=
        std::string::npos);
  CHECK(request_for("http://user@h/").find("authorization: Basic dXNlcjo=\r\n") != std::string::npos);
  CHECK(request_for("http://h/").find("authorization") == std::string::npos);
}

TEST_CASE("an empty path is sent as /, IPv6 hosts keep their brackets") {
  CHECK(request_for("http://[fd00::2]:8080") ==
        "PUT / HTTP/1.1\r\nhost: [fd00::2]:8080\r\nuser-agent: sluice\r\ncookie: chunked=true\r\n\r\n");
  CHECK(request_for("http://h?x=1").substr(0, 20) == "PUT /?x=1 HTTP/1.1\r\n");
}

TEST_CASE("options: no cookie for an unframed body, a versioned user agent") {
  ImportRequestOptions options;
  options.chunked = false;
  options.user_agent = "sluice/0.1.0";
  CHECK(request_for("http://h/import", options) == "PUT /import HTTP/1.1\r\nhost: h\r\nuser-agent: sluice/0.1.0\r\n\r\n");
}

TEST_CASE("nothing that could break the request line or inject a header") {
  CHECK(refusal_for("http:///import") == "cannot build the HTTP import request: the URI has no host");
  CHECK(refusal_for("http://h/a b") ==
        "cannot build the HTTP import request: the path '/a b' has spaces or control characters (percent-encode them)");
  CHECK(refusal_for("http://h%0d%0aX-Evil:1/") ==
        "cannot build the HTTP import request: the host 'h\\x0d\\x0aX-Evil:1' has spaces or control characters");
  ImportRequestOptions options;
  options.user_agent = "sluice\r\nx: y";
  CHECK(refusal_for("http://h/", options) ==
        "cannot build the HTTP import request: the user agent 'sluice\\x0d\\x0ax: y' is empty or has control "
        "characters");
}

TEST_CASE("the request parses back on the receiving side") {
  const std::string request = request_for("https://root:pw@host:443/import_raw_vdi?vdi=x");
  HttpRequestParser parser;
  auto taken = parser.feed(request + std::string(4, '\0'));
  REQUIRE(taken);
  CHECK(*taken == request.size());
  REQUIRE(parser.done());
  CHECK(parser.request().method == "PUT");
  CHECK(parser.request().path() == "/import_raw_vdi");
  CHECK(parser.request().query() == "vdi=x");
  CHECK(parser.request().headers.find("Cookie") == "chunked=true");
  CHECK(parser.request().headers.find("Host") == "host:443");
  CHECK_FALSE(parser.request().headers.contains("Content-Length"));
  CHECK_FALSE(parser.request().headers.contains("Transfer-Encoding"));
}
