#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocols/http/response_parser.hpp"

using namespace sluice;
using namespace std::string_literals;

namespace {

// What xapi's /import_raw_vdi answers before handing the socket to vhd-tool.
const std::string xapi_accept =
    "HTTP/1.1 200 OK\r\n"
    "Connection: close\r\n"
    "Cache-Control: no-cache, no-store\r\n"
    "task-id: OpaqueRef:5b1a2a26-7f7e-4c3c-9d8e-0d1f2e3a4b5c\r\n"
    "content-type: application/octet-stream\r\n"
    "\r\n";

// What /services/SM/nbd answers; the NBD handshake follows on the same stream.
const std::string xapi_nbd =
    "HTTP/1.1 200 OK\r\n"
    "Connection: keep-alive\r\n"
    "Cache-Control: no-cache, no-store\r\n"
    "Transfer-encoding: nbd\r\n"
    "\r\n";

const std::string nbd_greeting = std::string("NBDMAGIC") + "IHAVEOPT" + std::string("\x00\x03", 2);

std::string feed_error(const std::string& input) {
  HttpResponseParser parser;
  auto taken = parser.feed(input);
  REQUIRE_FALSE(taken);
  CHECK_FALSE(parser.done());
  return taken.error().message;
}

std::string head_with_size(std::size_t total) {
  const std::string start = "HTTP/1.1 200 OK\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  return start + std::string(total - start.size() - end.size(), 'p') + end;
}

}  // namespace

TEST_CASE("xapi's import answer: a 2xx head, nothing past the blank line taken") {
  HttpResponseParser parser;
  const std::string body = "\x01\x02\x03";
  auto taken = parser.feed(xapi_accept + body);
  REQUIRE(taken);
  CHECK(*taken == xapi_accept.size());
  REQUIRE(parser.done());
  const HttpResponseHead& response = parser.response();
  CHECK(response.status == 200);
  CHECK(response.reason == "OK");
  CHECK(response.version == "HTTP/1.1");
  CHECK(response.status_line == "HTTP/1.1 200 OK");
  CHECK_FALSE(response.transfer_encoding_nbd);
  CHECK(response.headers.find("TASK-ID") == "OpaqueRef:5b1a2a26-7f7e-4c3c-9d8e-0d1f2e3a4b5c");
  CHECK(response.headers.find("Content-Type") == "application/octet-stream");
  CHECK(response.headers.all().size() == 4);
  CHECK(parser.at_end_of_stream());
  // Done: later bytes belong to whatever follows.
  CHECK(parser.feed(std::string("more")) == 0u);
}

TEST_CASE("Transfer-Encoding: nbd switches protocols, whatever the case") {
  HttpResponseParser parser;
  auto taken = parser.feed(xapi_nbd + nbd_greeting);
  REQUIRE(taken);
  CHECK(*taken == xapi_nbd.size());
  REQUIRE(parser.done());
  CHECK(parser.response().transfer_encoding_nbd);
  CHECK(std::string(xapi_nbd + nbd_greeting).substr(*taken) == nbd_greeting);

  for (const char* line : {"TRANSFER-ENCODING: NBD", "transfer-encoding:nbd", "Transfer-Encoding: \t Nbd \t"}) {
    CAPTURE(line);
    HttpResponseParser p;
    REQUIRE(p.feed("HTTP/1.1 200 OK\r\n" + std::string(line) + "\r\n\r\n"));
    REQUIRE(p.done());
    CHECK(p.response().transfer_encoding_nbd);
  }
  for (const char* line : {"Transfer-Encoding: chunked", "Transfer-Encoding: nbd2", "X-Transfer-Encoding: nbd",
                           "Content-Encoding: nbd"}) {
    CAPTURE(line);
    HttpResponseParser p;
    REQUIRE(p.feed("HTTP/1.1 200 OK\r\n" + std::string(line) + "\r\n\r\n"));
    REQUIRE(p.done());
    CHECK_FALSE(p.response().transfer_encoding_nbd);
  }
}

TEST_CASE("one byte at a time: exactly the head is taken") {
  const std::string stream = xapi_nbd + nbd_greeting;
  HttpResponseParser parser;
  std::size_t taken_total = 0;
  std::size_t i = 0;
  for (; i < stream.size() && !parser.done(); ++i) {
    auto taken = parser.feed(stream.substr(i, 1));
    REQUIRE(taken);
    CHECK(*taken == 1);
    taken_total += *taken;
    if (!parser.done()) CHECK(parser.at_end_of_stream().has_value() == false);
  }
  CHECK(i == xapi_nbd.size());
  CHECK(taken_total == xapi_nbd.size());
  REQUIRE(parser.done());
  CHECK(parser.response().transfer_encoding_nbd);
  CHECK(parser.feed(stream.substr(i, 1)) == 0u);
}

TEST_CASE("split anywhere into two or three feeds, the result is the same") {
  const std::string stream = xapi_accept + "BODY";
  for (std::size_t a = 0; a <= stream.size(); ++a) {
    for (std::size_t b = a; b <= stream.size(); b += 7) {
      CAPTURE(a);
      CAPTURE(b);
      HttpResponseParser parser;
      std::size_t taken_total = 0;
      for (auto piece : {stream.substr(0, a), stream.substr(a, b - a), stream.substr(b)}) {
        auto taken = parser.feed(piece);
        REQUIRE(taken);
        CHECK(*taken <= piece.size());
        if (!parser.done()) CHECK(*taken == piece.size());
        taken_total += *taken;
      }
      REQUIRE(parser.done());
      CHECK(taken_total == xapi_accept.size());
      CHECK(parser.response().headers.find("connection") == "close");
    }
  }
}

TEST_CASE("the raw byte-span feed gives the same answer") {
  const std::string stream = xapi_accept + "B";
  std::vector<std::byte> bytes;
  for (char c : stream) bytes.push_back(static_cast<std::byte>(c));
  HttpResponseParser parser;
  auto taken = parser.feed(std::span<const std::byte>(bytes));
  REQUIRE(taken);
  CHECK(*taken == xapi_accept.size());
  CHECK(parser.done());
}

TEST_CASE("any 2xx goes on; an empty reason is accepted") {
  HttpResponseParser parser;
  REQUIRE(parser.feed(std::string("HTTP/1.0 204 No Content\r\n\r\n")));
  REQUIRE(parser.done());
  CHECK(parser.response().status == 204);

  HttpResponseParser bare;
  REQUIRE(bare.feed(std::string("HTTP/1.1 200\r\n\r\n")));
  REQUIRE(bare.done());
  CHECK(bare.response().reason.empty());

  HttpResponseParser spaced;
  REQUIRE(spaced.feed(std::string("HTTP/1.1 299 \r\n\r\n")));
  CHECK(spaced.done());
}

TEST_CASE("non-2xx answers are refused, naming the status line") {
  CHECK(feed_error("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n") ==
        "the server answered 'HTTP/1.1 404 Not Found'");
  CHECK(feed_error("HTTP/1.1 500 Internal Server Error\r\n\r\n") ==
        "the server answered 'HTTP/1.1 500 Internal Server Error'");
  CHECK(feed_error("HTTP/1.1 302 Found\r\nlocation: https://10.0.0.3/import_raw_vdi?vdi=x\r\n\r\n") ==
        "the server answered 'HTTP/1.1 302 Found' (a redirect to 'https://10.0.0.3/import_raw_vdi?vdi=x', which "
        "is not followed)");
  CHECK(feed_error("HTTP/1.1 301 Moved\r\n\r\n") ==
        "the server answered 'HTTP/1.1 301 Moved' (a redirect, which is not followed)");
  CHECK(feed_error("HTTP/1.1 101 Switching Protocols\r\n\r\n") ==
        "the server answered 'HTTP/1.1 101 Switching Protocols'");
  CHECK(feed_error("HTTP/1.1 401 Unauthorized\r\n\r\n") == "the server answered 'HTTP/1.1 401 Unauthorized'");
}

TEST_CASE("after a failure the parser keeps failing and at_end_of_stream repeats the error") {
  HttpResponseParser parser;
  REQUIRE_FALSE(parser.feed(std::string("HTTP/1.1 404 Not Found\r\n\r\n")));
  auto again = parser.feed(xapi_accept);
  REQUIRE_FALSE(again);
  CHECK(again.error().message == "the server answered 'HTTP/1.1 404 Not Found'");
  auto end = parser.at_end_of_stream();
  REQUIRE_FALSE(end);
  CHECK(end.error().message == "the server answered 'HTTP/1.1 404 Not Found'");
  CHECK_FALSE(parser.done());
}

TEST_CASE("a connection closed mid-head is an error") {
  HttpResponseParser parser;
  REQUIRE(parser.feed(std::string("HTTP/1.1 200 OK\r\nConn")));
  auto end = parser.at_end_of_stream();
  REQUIRE_FALSE(end);
  CHECK(end.error().message ==
        "the server closed the connection after 21 bytes, before the end of its HTTP response headers");

  HttpResponseParser silent;
  CHECK(silent.at_end_of_stream().error().message ==
        "the server closed the connection after 0 bytes, before the end of its HTTP response headers");
}

TEST_CASE("headers up to 64 KiB are read, larger ones refused") {
  const std::string exact = head_with_size(max_http_head_size);
  HttpResponseParser parser;
  auto taken = parser.feed(exact + "body");
  REQUIRE(taken);
  CHECK(*taken == max_http_head_size);
  CHECK(parser.done());

  const std::string over = head_with_size(max_http_head_size + 1);
  HttpResponseParser big;
  auto refused = big.feed(over);
  REQUIRE_FALSE(refused);
  CHECK((refused.error().code == std::errc::message_size));
  CHECK(refused.error().message == "the HTTP response from the server has headers over 64 KiB without ending");

  // The same in small feeds: refused as soon as the limit is reached.
  HttpResponseParser trickle;
  std::size_t fed = 0;
  Result<std::size_t> last = 0;
  while (fed < over.size() && (last = trickle.feed(over.substr(fed, 1000)))) fed += *last;
  REQUIRE_FALSE(last);
  CHECK(fed == max_http_head_size - max_http_head_size % 1000);
}

TEST_CASE("bytes that cannot start an HTTP response fail at once") {
  // An NBD server's greeting: refused at its first byte, not after 64 KiB.
  HttpResponseParser first_byte;
  auto n = first_byte.feed(std::string("N"));
  REQUIRE_FALSE(n);
  CHECK(n.error().message == "the server did not answer with HTTP: it sent 'N'");

  HttpResponseParser nbd;
  auto taken = nbd.feed(nbd_greeting);
  REQUIRE_FALSE(taken);
  CHECK((taken.error().code == std::errc::protocol_error));
  CHECK(taken.error().message == "the server did not answer with HTTP: it sent 'NBDMAGICIHAVEOPT...'");

  // A TLS alert from a TLS port spoken to in plain text.
  CHECK(feed_error(std::string("\x15\x03\x03\x00\x02\x02\x46", 7)) ==
        "the server did not answer with HTTP: it sent '\\x15\\x03\\x03\\x00\\x02\\x02F'");

  HttpResponseParser partial;
  REQUIRE(partial.feed(std::string("HTT")));
  auto wrong = partial.feed(std::string("X"));
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == "the server did not answer with HTTP: it sent 'HTTX'");
}

TEST_CASE("malformed heads are refused with the offending line") {
  CHECK(feed_error("HTTP/1.1 abc OK\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/1.1 abc OK'");
  CHECK(feed_error("HTTP/1.1 200OK\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/1.1 200OK'");
  CHECK(feed_error("HTTP/11 200 OK\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/11 200 OK'");
  CHECK(feed_error("HTTP/1.1  200 OK\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/1.1  200 OK'");
  CHECK(feed_error("HTTP/1.1 600 Odd\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/1.1 600 Odd'");
  CHECK(feed_error("HTTP/1.1 20\r\n\r\n") == "malformed HTTP response from the server: bad status line 'HTTP/1.1 20'");
  CHECK(feed_error("HTTP/1.1 200 O\x01K\r\n\r\n") ==
        "malformed HTTP response from the server: bad status line 'HTTP/1.1 200 O\\x01K'");
  CHECK(feed_error("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n") ==
        "malformed HTTP response from the server: header line 'no colon here' has no colon");
  CHECK(feed_error("HTTP/1.1 200 OK\r\nFoo : bar\r\n\r\n") ==
        "malformed HTTP response from the server: invalid header name in 'Foo : bar'");
  CHECK(feed_error("HTTP/1.1 200 OK\r\n: bar\r\n\r\n") ==
        "malformed HTTP response from the server: invalid header name in ': bar'");
  CHECK(feed_error("HTTP/1.1 200 OK\r\nFoo: bar\r\n  folded\r\n\r\n") ==
        "malformed HTTP response from the server: folded header line '  folded'");
  CHECK(feed_error("HTTP/1.1 200 OK\rFoo: bar\r\n\r\n") ==
        "malformed HTTP response from the server: bare CR in line 'HTTP/1.1 200 OK\\x0dFoo: bar'");
  CHECK(feed_error("HTTP/1.1 200 OK\r\nFoo: a\x00z\r\n\r\n"s) ==
        "malformed HTTP response from the server: control character in header 'Foo: a\\x00z'");
}

TEST_CASE("interim 1xx answers are skipped; the final answer decides, and the body is left alone") {
  const std::string answer = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX: y\r\n\r\n"
                             "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\r\n";
  const std::string body = "NBDMAGIC";
  HttpResponseParser whole;
  auto taken = whole.feed(answer + body);
  REQUIRE(taken);
  CHECK(*taken == answer.size());
  REQUIRE(whole.done());
  CHECK(whole.response().status == 200);
  CHECK(whole.response().headers.find("content-type").value_or("") == "application/octet-stream");
  // One byte at a time, as the import client reads.
  HttpResponseParser bytewise;
  for (char c : answer) REQUIRE(bytewise.feed(std::string_view(&c, 1)));
  REQUIRE(bytewise.done());
  CHECK(bytewise.response().status == 200);
  CHECK(feed_error("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\n\r\n") ==
        "the server answered 'HTTP/1.1 403 Forbidden'");
}

TEST_CASE("lines may end in a bare LF, as cohttp allows") {
  HttpResponseParser parser;
  const std::string head = "HTTP/1.1 200 OK\ncontent-type: application/octet-stream\n\n";
  auto taken = parser.feed(head + "rest");
  REQUIRE(taken);
  CHECK(*taken == head.size());
  REQUIRE(parser.done());
  CHECK(parser.response().reason == "OK");
  CHECK(parser.response().headers.find("Content-Type").value_or("") == "application/octet-stream");
  // Mixed, and split one byte at a time.
  HttpResponseParser mixed;
  const std::string mixed_head = "HTTP/1.1 200 OK\r\nX: 1\n\r\n";
  for (char c : mixed_head) REQUIRE(mixed.feed(std::string_view(&c, 1)));
  REQUIRE(mixed.done());
  CHECK(mixed.response().headers.find("X").value_or("") == "1");
}
