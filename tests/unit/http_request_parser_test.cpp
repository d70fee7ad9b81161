#include <doctest/doctest.h>

#include <string>

#include "protocols/chunked/chunk_header.hpp"
#include "protocols/http/request_parser.hpp"

using namespace sluice;

namespace {

// vhd-tool's request (cohttp writes the lower-case names).
const std::string vhd_tool_request =
    "PUT /import_raw_vdi?vdi=OpaqueRef:abc&session_id=OpaqueRef:def&task_id=OpaqueRef:123 HTTP/1.1\r\n"
    "host: 10.0.0.2\r\n"
    "user-agent: ocaml-cohttp/5.3.0\r\n"
    "cookie: chunked=true\r\n"
    "\r\n";

// The first Chunked record follows right after the head.
std::string first_chunk() {
  auto header = encode_chunk_header({0, 512});
  REQUIRE(header);
  return std::string(reinterpret_cast<const char*>(header->data()), header->size()) + std::string(512, 'd');
}

std::string feed_error(const std::string& input) {
  HttpRequestParser parser;
  auto taken = parser.feed(input);
  REQUIRE_FALSE(taken);
  CHECK((taken.error().code != std::error_code{}));
  CHECK_FALSE(parser.done());
  return taken.error().message;
}

}  // namespace

TEST_CASE("vhd-tool's request: method, target, headers, and the body left alone") {
  const std::string stream = vhd_tool_request + first_chunk();
  HttpRequestParser parser;
  auto taken = parser.feed(stream);
  REQUIRE(taken);
  CHECK(*taken == vhd_tool_request.size());
  REQUIRE(parser.done());
  const HttpRequestHead& request = parser.request();
  CHECK(request.method == "PUT");
  CHECK(request.target == "/import_raw_vdi?vdi=OpaqueRef:abc&session_id=OpaqueRef:def&task_id=OpaqueRef:123");
  CHECK(request.path() == "/import_raw_vdi");
  CHECK(request.query() == "vdi=OpaqueRef:abc&session_id=OpaqueRef:def&task_id=OpaqueRef:123");
  CHECK(request.version == "HTTP/1.1");
  CHECK(request.headers.find("Host") == "10.0.0.2");
  CHECK(request.headers.find("COOKIE") == "chunked=true");
  CHECK(request.headers.find("User-Agent") == "ocaml-cohttp/5.3.0");
  CHECK_FALSE(request.headers.contains("Transfer-Encoding"));
  CHECK(stream.substr(*taken) == first_chunk());
  CHECK(parser.at_end_of_stream());
  CHECK(parser.feed(std::string("x")) == 0u);
}

TEST_CASE("a target without a query") {
  HttpRequestParser parser;
  REQUIRE(parser.feed(std::string("PUT /services/SM/data/sr/vdi HTTP/1.0\r\n\r\n")));
  REQUIRE(parser.done());
  CHECK(parser.request().path() == "/services/SM/data/sr/vdi");
  CHECK(parser.request().query().empty());
  CHECK(parser.request().version == "HTTP/1.0");
  CHECK(parser.request().headers.all().empty());
}

TEST_CASE("one byte at a time, and split at every point") {
  const std::string stream = vhd_tool_request + first_chunk();
  {
    HttpRequestParser parser;
    std::size_t i = 0;
    for (; i < stream.size() && !parser.done(); ++i) {
      auto taken = parser.feed(stream.substr(i, 1));
      REQUIRE(taken);
      CHECK(*taken == 1);
    }
    CHECK(i == vhd_tool_request.size());
    REQUIRE(parser.done());
    CHECK(parser.request().headers.find("cookie") == "chunked=true");
  }
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    CAPTURE(split);
    HttpRequestParser parser;
    auto first = parser.feed(stream.substr(0, split));
    REQUIRE(first);
    auto second = parser.feed(stream.substr(split));
    REQUIRE(second);
    CHECK(*first + *second == vhd_tool_request.size());
    REQUIRE(parser.done());
    CHECK(parser.request().method == "PUT");
  }
}

TEST_CASE("the byte-span feed") {
  const std::string stream = vhd_tool_request + "Z";
  HttpRequestParser parser;
  auto taken = parser.feed(std::span(reinterpret_cast<const std::byte*>(stream.data()), stream.size()));
  REQUIRE(taken);
  CHECK(*taken == vhd_tool_request.size());
}

TEST_CASE("a Chunked stream sent without the handshake fails on its first byte") {
  CHECK(feed_error(first_chunk()) ==
        "the client did not send an HTTP request: it sent '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00"
        "\\x00dddd...'");
  // A TLS ClientHello on a plain-text port.
  CHECK(feed_error(std::string("\x16\x03\x01\x02\x00", 5)) ==
        "the client did not send an HTTP request: it sent '\\x16\\x03\\x01\\x02\\x00'");
  CHECK(feed_error(std::string(" PUT / HTTP/1.1\r\n\r\n")) ==
        "the client did not send an HTTP request: it sent ' PUT / HTTP/1.1\\x0d...'");
  // A method longer than any real one, before its line even ends.
  CHECK(feed_error(std::string(33, 'A')) ==
        "the client did not send an HTTP request: it sent 'AAAAAAAAAAAAAAAA...'");
  HttpRequestParser thirty_two;
  CHECK(thirty_two.feed(std::string(32, 'A')));
}

TEST_CASE("malformed request lines and headers") {
  CHECK(feed_error("PUT  /x HTTP/1.1\r\n\r\n") ==
        "malformed HTTP request from the client: bad request line 'PUT  /x HTTP/1.1'");
  CHECK(feed_error("PUT /x\r\n\r\n") == "malformed HTTP request from the client: bad request line 'PUT /x'");
  CHECK(feed_error("PUT /a b HTTP/1.1\r\n\r\n") ==
        "malformed HTTP request from the client: bad request line 'PUT /a b HTTP/1.1'");
  CHECK(feed_error("PUT /x HTTP/1.1x\r\n\r\n") ==
        "malformed HTTP request from the client: bad request line 'PUT /x HTTP/1.1x'");
  CHECK(feed_error("PUT /x FTP/1.1\r\n\r\n") ==
        "malformed HTTP request from the client: bad request line 'PUT /x FTP/1.1'");
  CHECK(feed_error("PUT /x HTTP/1.1\r\nHost 10.0.0.2\r\n\r\n") ==
        "malformed HTTP request from the client: header line 'Host 10.0.0.2' has no colon");
  CHECK(feed_error("PUT /x HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n") ==
        "malformed HTTP request from the client: invalid header name in 'Transfer-Encoding : chunked'");
  CHECK(feed_error("PUT /x HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n") ==
        "malformed HTTP request from the client: folded header line '\\x09c'");
}

TEST_CASE("request heads over 64 KiB are refused") {
  const std::string start = "PUT /x HTTP/1.1\r\nCookie: ";
  const std::string exact = start + std::string(max_http_head_size - start.size() - 4, 'c') + "\r\n\r\n";
  HttpRequestParser fits;
  auto taken = fits.feed(exact);
  REQUIRE(taken);
  CHECK(*taken == max_http_head_size);
  CHECK(fits.done());

  HttpRequestParser parser;
  auto refused = parser.feed(start + std::string(max_http_head_size, 'c'));
  REQUIRE_FALSE(refused);
  CHECK((refused.error().code == std::errc::message_size));
  CHECK(refused.error().message == "the HTTP request from the client has headers over 64 KiB without ending");
  CHECK_FALSE(parser.feed(std::string("\r\n\r\n")));
}

TEST_CASE("a client that hangs up mid-head") {
  HttpRequestParser parser;
  REQUIRE(parser.feed(std::string("PUT /x HTTP/1.1\r\n")));
  auto end = parser.at_end_of_stream();
  REQUIRE_FALSE(end);
  CHECK(end.error().message ==
        "the client closed the connection after 17 bytes, before the end of its HTTP request headers");
}

TEST_CASE("empty lines before the request line are ignored, and LF-only lines are taken") {
  HttpRequestParser parser;
  const std::string head = "\r\n\nPUT /import_raw_vdi HTTP/1.1\nHost: x\n\n";
  auto taken = parser.feed(head + "body");
  REQUIRE(taken);
  CHECK(*taken == head.size());
  REQUIRE(parser.done());
  CHECK(parser.request().method == "PUT");
  CHECK(parser.request().target == "/import_raw_vdi");
  HttpRequestParser bytewise;
  std::size_t total = 0;
  for (char c : head) {
    auto n = bytewise.feed(std::string_view(&c, 1));
    REQUIRE(n);
    total += *n;
  }
  CHECK(total == head.size());
  REQUIRE(bytewise.done());
  CHECK(bytewise.request().target == "/import_raw_vdi");
}
