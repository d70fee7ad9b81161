#include <doctest/doctest.h>

#include <string>

#include "protocols/http/import_response.hpp"
#include "protocols/http/response_parser.hpp"

using namespace sluice;

namespace {

constexpr std::uint64_t image_size = 1048576;

ImportPolicy any_framing() {
  ImportPolicy policy;
  policy.image_size = image_size;
  return policy;
}

HttpRequestHead request(const std::string& head) {
  HttpRequestParser parser;
  auto taken = parser.feed(head);
  REQUIRE(taken);
  REQUIRE(parser.done());
  return parser.request();
}

ImportResponse decide(const std::string& head, const ImportPolicy& policy = any_framing()) {
  return decide_import_response(request(head), policy);
}

}  // namespace

TEST_CASE("a bare PUT is accepted with exactly xapi's headers") {
  auto decision = decide("PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nhost: h\r\nuser-agent: ocaml-cohttp/5.3.0\r\n"
                         "cookie: chunked=true\r\n\r\n");
  CHECK(decision.status == 200);
  CHECK(decision.accepted);
  CHECK(decision.framing == ImportFraming::chunked);
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

TEST_CASE("the framing is the request's: a chunked cookie or query parameter means Chunked, none raw") {
  struct Case {
    const char* head;
    ImportFraming framing;
  };
  for (const Case& c : {
           Case{"PUT /import_raw_vdi?vdi=x HTTP/1.1\r\ncookie: chunked=true\r\n\r\n", ImportFraming::chunked},
           Case{"PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nCookie: session_id=s; chunked\r\n\r\n", ImportFraming::chunked},
           Case{"PUT /import_raw_vdi?vdi=x&chunked=true HTTP/1.1\r\n\r\n", ImportFraming::chunked},
           Case{"PUT /import_raw_vdi?chunked HTTP/1.1\r\n\r\n", ImportFraming::chunked},
           Case{"PUT /import_raw_vdi?vdi=x HTTP/1.1\r\n\r\n", ImportFraming::raw},
           Case{"PUT /import_raw_vdi?vdi=x&notchunked=1 HTTP/1.1\r\ncookie: session_id=chunked\r\n\r\n",
                ImportFraming::raw},
           Case{"PUT /import_raw_vdi?vdi=x&format=raw HTTP/1.1\r\n\r\n", ImportFraming::raw},
       }) {
    CAPTURE(c.head);
    auto decision = decide(c.head);
    CHECK(decision.status == 200);
    CHECK(decision.accepted);
    CHECK(decision.framing == c.framing);
  }
}

TEST_CASE("serve --protocol given: a request asking for the other framing gets 400, before any body") {
  ImportPolicy raw_only = any_framing();
  raw_only.framing = ImportFraming::raw;
  auto chunked_request = decide("PUT /import_raw_vdi?vdi=x HTTP/1.1\r\ncookie: chunked=true\r\n\r\n", raw_only);
  CHECK(chunked_request.status == 400);
  CHECK_FALSE(chunked_request.accepted);
  CHECK(chunked_request.reason.find("asks for a chunked body") != std::string::npos);
  CHECK(chunked_request.reason.find("takes only raw (serve --protocol raw)") != std::string::npos);
  CHECK(decide("PUT /import_raw_vdi HTTP/1.1\r\n\r\n", raw_only).accepted);

  ImportPolicy chunked_only = any_framing();
  chunked_only.framing = ImportFraming::chunked;
  auto raw_request = decide("PUT /import_raw_vdi?vdi=x HTTP/1.1\r\n\r\n", chunked_only);
  CHECK(raw_request.status == 400);
  CHECK(raw_request.reason.find("asks for a raw body") != std::string::npos);
  CHECK(decide("PUT /import_raw_vdi?chunked HTTP/1.1\r\n\r\n", chunked_only).accepted);
}

TEST_CASE("a raw body's Content-Length must be the image's size") {
  CHECK(decide("PUT /import_raw_vdi HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n").accepted);
  auto shorter = decide("PUT /import_raw_vdi HTTP/1.1\r\nContent-Length: 4096\r\n\r\n");
  CHECK(shorter.status == 400);
  CHECK(shorter.reason == "Content-Length 4096 is not the image's size, 1048576 bytes: a raw import fills the whole image.");
  CHECK(decide("PUT /import_raw_vdi HTTP/1.1\r\nContent-Length: 2097152\r\n\r\n").status == 400);
  for (const char* bad : {"12x", "-1", "", "99999999999999999999999"}) {
    CAPTURE(bad);
    auto malformed = decide("PUT /import_raw_vdi HTTP/1.1\r\nContent-Length: " + std::string(bad) + "\r\n\r\n");
    CHECK(malformed.status == 400);
    CHECK(malformed.reason.find("is not a number") != std::string::npos);
  }
  // Chunked records carry their own lengths; xapi ignores a Content-Length there.
  CHECK(decide("PUT /import_raw_vdi?chunked HTTP/1.1\r\nContent-Length: 7\r\n\r\n").accepted);
}

TEST_CASE("only the import paths are served: others get 404") {
  CHECK(decide("PUT /import_raw_vdi HTTP/1.1\r\n\r\n").accepted);
  CHECK(decide("PUT /services/SM/data/sr-uuid/vdi-uuid HTTP/1.1\r\n\r\n").accepted);
  for (const char* path : {"/import", "/", "/import_raw_vdi/x", "/services/SM/data/", "/services/SM/nbd/sr/vdi/dp",
                           "/IMPORT_RAW_VDI", "/export_raw_vdi"}) {
    CAPTURE(path);
    auto decision = decide("PUT " + std::string(path) + "?vdi=x HTTP/1.1\r\n\r\n");
    CHECK(decision.status == 404);
    CHECK(decision.bytes.rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
    CHECK(decision.reason.find(std::string("No import at '") + path + "'") != std::string::npos);
  }
  ImportPolicy extra = any_framing();
  extra.paths = {"/import"};
  CHECK(decide("PUT /import?chunked HTTP/1.1\r\n\r\n", extra).accepted);
  CHECK(decide("PUT /import/more HTTP/1.1\r\n\r\n", extra).status == 404);
}

TEST_CASE("a format other than raw gets 404") {
  for (const char* head : {"PUT /import_raw_vdi?format=vhd HTTP/1.1\r\n\r\n",
                           "PUT /import_raw_vdi?vdi=x&format=tar HTTP/1.1\r\n\r\n",
                           "PUT /import_raw_vdi HTTP/1.1\r\ncookie: format=qcow2\r\n\r\n"}) {
    CAPTURE(head);
    auto decision = decide(head);
    CHECK(decision.status == 404);
    CHECK(decision.reason.find("is not supported: this server imports raw images") != std::string::npos);
  }
}

TEST_CASE("any Transfer-Encoding is refused with 404, saying why") {
  for (const char* field : {"Transfer-Encoding: chunked", "transfer-encoding: nbd", "TRANSFER-ENCODING: identity"}) {
    CAPTURE(field);
    auto decision = decide("PUT /import_raw_vdi HTTP/1.1\r\n" + std::string(field) + "\r\n\r\n");
    CHECK(decision.status == 404);
    CHECK_FALSE(decision.accepted);
    HttpResponseParser sender;
    auto refused = sender.feed(decision.bytes);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == "the server answered 'HTTP/1.1 404 Transfer-Encoding Not Supported'");
  }
  auto decision = decide("PUT /import_raw_vdi HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string body =
      "Transfer-Encoding 'chunked' is not supported: the import body follows the headers as raw bytes or Chunked "
      "records.\n";
  CHECK(decision.bytes ==
        "HTTP/1.1 404 Transfer-Encoding Not Supported\r\n"
        "Connection: close\r\n"
        "Content-Type: text/plain\r\n"
        "Content-Length: 115\r\n"
        "\r\n" +
            body);
  CHECK(body.size() == 115);
}

TEST_CASE("other methods get 405 with Allow: PUT") {
  const std::string golden =
      "HTTP/1.1 405 Method Not Allowed\r\n"
      "Allow: PUT\r\n"
      "Connection: close\r\n"
      "Content-Type: text/plain\r\n"
      "Content-Length: 57\r\n"
      "\r\n"
      "This server accepts only PUT: the xapi import handshake.\n";
  for (const char* method : {"GET", "POST", "put", "OPTIONS"}) {
    CAPTURE(method);
    auto decision = decide(std::string(method) + " /import_raw_vdi HTTP/1.1\r\n\r\n");
    CHECK(decision.status == 405);
    CHECK_FALSE(decision.accepted);
    CHECK(decision.bytes == golden);
  }
  // The method is judged first, even with a Transfer-Encoding.
  CHECK(decide("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status == 405);
  // HEAD is told the length but gets no body.
  auto head = decide("HEAD /import_raw_vdi HTTP/1.1\r\n\r\n");
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
