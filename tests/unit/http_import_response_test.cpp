#include <doctest/doctest.h>

#include <string>

#include "protocols/http/import_response.hpp"
#include "protocols/http/response_parser.hpp"

using namespace sluice;

namespace {

HttpRequestHead request(const std::string& head) {
  HttpRequestParser parser;
  auto taken = parser.feed(head);
  REQUIRE(taken);
  REQUIRE(parser.done());
  return parser.request();
}

}  // namespace

TEST_CASE("a bare PUT is accepted with exactly xapi's headers") {
  auto decision = decide_import_response(
      request("PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nhost: h\r\nuser-agent: ocaml-cohttp/5.3.0\r\n"
              "cookie: chunked=true\r\n\r\n"));
  CHECK(decision.status == 200);
  CHECK(decision.accepted);
  CHECK(decision.bytes ==
        "HTTP/1.1 200 OK\r\n"
        "Connection: close\r\n"
        "Cache-Control: no-cache, no-store\r\n"
        "content-type: application/octet-stream\r\n"
        "\r\n");

  // The sender's parser takes all of it and stays on Chunked.
  HttpResponseParser sender;
  auto taken = sender.feed(decision.bytes + "\x01");
  REQUIRE(taken);
  CHECK(*taken == decision.bytes.size());
  REQUIRE(sender.done());
  CHECK_FALSE(sender.response().transfer_encoding_nbd);
}

TEST_CASE("a Content-Length does not change the answer (xapi's raw imports send one)") {
  auto decision = decide_import_response(request("PUT /import HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n"));
  CHECK(decision.accepted);
  CHECK(decision.status == 200);
}

TEST_CASE("any Transfer-Encoding is refused with 404, saying why") {
  for (const char* field : {"Transfer-Encoding: chunked", "transfer-encoding: nbd", "TRANSFER-ENCODING: identity"}) {
    CAPTURE(field);
    auto decision = decide_import_response(request("PUT /import HTTP/1.1\r\n" + std::string(field) + "\r\n\r\n"));
    CHECK(decision.status == 404);
    CHECK_FALSE(decision.accepted);
    HttpResponseParser sender;
    auto refused = sender.feed(decision.bytes);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == "the server answered 'HTTP/1.1 404 Transfer-Encoding Not Supported'");
  }
  auto decision = decide_import_response(request("PUT /import HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string body =
      "Transfer-Encoding 'chunked' is not supported: the import body follows the headers as raw Chunked records.\n";
  CHECK(decision.bytes ==
        "HTTP/1.1 404 Transfer-Encoding Not Supported\r\n"
        "Connection: close\r\n"
        "Content-Type: text/plain\r\n"
        "Content-Length: 106\r\n"
        "\r\n" +
            body);
  CHECK(body.size() == 106);
}

TEST_CASE("other methods get 405 with Allow: PUT") {
  const std::string golden =
      "HTTP/1.1 405 Method Not Allowed\r\n"
      "Allow: PUT\r\n"
      "Connection: close\r\n"
      "Content-Type: text/plain\r\n"
      "Content-Length: 78\r\n"
      "\r\n"
      "This server accepts only PUT: the xapi import handshake, with a Chunked body.\n";
  for (const char* method : {"GET", "POST", "put", "OPTIONS"}) {
    CAPTURE(method);
    auto decision = decide_import_response(request(std::string(method) + " /import HTTP/1.1\r\n\r\n"));
    CHECK(decision.status == 405);
    CHECK_FALSE(decision.accepted);
    CHECK(decision.bytes == golden);
  }
  // The method is judged first, even with a Transfer-Encoding.
  CHECK(decide_import_response(request("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")).status == 405);
  // HEAD is told the length but gets no body.
  auto head = decide_import_response(request("HEAD /import HTTP/1.1\r\n\r\n"));
  CHECK(head.status == 405);
  CHECK(head.bytes == golden.substr(0, golden.find("\r\n\r\n") + 4));
}

TEST_CASE("http_error_response for requests that did not parse") {
  CHECK(http_error_response(400, "Bad Request", "malformed request line") ==
        "HTTP/1.1 400 Bad Request\r\n"
        "Connection: close\r\n"
        "Content-Type: text/plain\r\n"
        "Content-Length: 23\r\n"
        "\r\n"
        "malformed request line\n");
}
