#include <doctest/doctest.h>

#include <string>

#include "memory_endpoints.hpp"
#include "memory_stream.hpp"
#include "protocols/chunked/chunk_header.hpp"
#include "protocols/chunked/chunked_receiver.hpp"
#include "protocols/http/import_client.hpp"
#include "protocols/http/import_server.hpp"
#include "run_loop.hpp"

using namespace sluice;

namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

std::string text_of(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

TEST_CASE("HTTP import, sender: the PUT as vhd-tool sends it; the answer is read up to its blank line only") {
  ImportRequestOptions options;
  auto uri = parse_uri("http://user:pw@xs1.example:8080/import_raw_vdi?vdi=OpaqueRef:1&session_id=s");
  REQUIRE(uri);
  test::MemoryStream stream(bytes_of("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nTransfer-encoding: nbd\r\n\r\n"
                                     "NBDMAGIC"),
                            4096);
  auto task = [&]() -> awaitable<Result<std::string>> {
    auto head = co_await start_http_import(stream, *uri, options);
    if (!head) co_return tl::unexpected(head.error());
    CHECK(head->status == 200);
    CHECK(head->transfer_encoding_nbd);
    std::string next(8, '\0');
    auto span = std::as_writable_bytes(std::span(next));
    if (Status s = co_await stream.read_exactly(span); !s) co_return tl::unexpected(s.error());
    co_return next;
  };
  auto after = test::run(task());
  REQUIRE(after);
  CHECK(*after == "NBDMAGIC");  // nothing past the head was consumed
  CHECK(text_of(stream.sent) ==
        "PUT /import_raw_vdi?vdi=OpaqueRef:1&session_id=s HTTP/1.1\r\n"
        "host: xs1.example:8080\r\n"
        "user-agent: sluice\r\n"
        "cookie: chunked=true\r\n"
        "authorization: Basic dXNlcjpwdw==\r\n"
        "\r\n");
}

TEST_CASE("HTTP import, sender: a non-2xx answer fails naming the status line; a cut answer fails too") {
  auto uri = parse_uri("http://h/x");
  REQUIRE(uri);
  {
    test::MemoryStream stream(bytes_of("HTTP/1.1 302 Found\r\nLocation: https://other/x\r\n\r\n"));
    auto head = test::run(start_http_import(stream, *uri, ImportRequestOptions{}));
    REQUIRE_FALSE(head);
    CHECK(head.error().message.find("HTTP/1.1 302 Found") != std::string::npos);
  }
  {
    test::MemoryStream stream(bytes_of("HTTP/1.1 200 OK\r\nConn"));
    auto head = test::run(start_http_import(stream, *uri, ImportRequestOptions{}));
    REQUIRE_FALSE(head);
    CHECK(head.error().message.find("before the end of its HTTP response headers") != std::string::npos);
  }
}

TEST_CASE("HTTP import, receiver: a PUT gets xapi's 200 and the Chunked body that follows is received") {
  std::vector<std::byte> input = bytes_of("PUT /import_raw_vdi?vdi=x HTTP/1.1\r\nhost: h\r\ncookie: chunked=true\r\n\r\n");
  auto header = encode_chunk_header(ChunkHeader{512, 512});
  input.insert(input.end(), header->begin(), header->end());
  input.insert(input.end(), 512, std::byte{0x5A});
  input.insert(input.end(), chunk_terminator_bytes.begin(), chunk_terminator_bytes.end());
  test::MemoryStream stream(input, 50);  // the head and the body share reads
  test::CheckingSink sink(4096);
  StreamReader reader(stream);
  auto task = [&]() -> awaitable<Status> {
    ImportPolicy policy;
    policy.image_size = 4096;
    auto accepted = co_await answer_http_import(reader, policy);
    if (!accepted) co_return tl::unexpected(accepted.error());
    CHECK(accepted->request.path() == "/import_raw_vdi");
    CHECK(accepted->framing == ImportFraming::chunked);
    ReceiveOptions options;
    options.image_size = 4096;
    auto received = co_await receive_chunked(reader, sink, options);
    if (!received) co_return tl::unexpected(received.error());
    co_return Status{};
  };
  REQUIRE(test::run(task()));
  CHECK(text_of(stream.sent) ==
        "HTTP/1.1 200 OK\r\nConnection: close\r\nCache-Control: no-cache, no-store\r\n"
        "content-type: application/octet-stream\r\n\r\n");
  CHECK(sink.image[512] == std::byte{0x5A});
  CHECK(sink.flushed);
}

TEST_CASE("HTTP import, receiver: other methods, Transfer-Encoding and garbage are refused with 4xx") {
  struct Case {
    const char* request;
    const char* status_line;
  };
  for (const Case& c : {Case{"GET /import_raw_vdi HTTP/1.1\r\nhost: h\r\n\r\n", "HTTP/1.1 405 Method Not Allowed"},
                        Case{"PUT /import_raw_vdi HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
                             "HTTP/1.1 404 Transfer-Encoding Not Supported"},
                        Case{"PUT /import HTTP/1.1\r\nhost: h\r\n\r\n", "HTTP/1.1 404 Not Found"},
                        Case{"PUT /import_raw_vdi HTTP/1.1\r\nContent-Length: 512\r\n\r\n",
                             "HTTP/1.1 400 Bad Request"},
                        Case{"\x01\x02\x03\x04garbage\r\n\r\n", "HTTP/1.1 400 Bad Request"}}) {
    CAPTURE(c.request);
    test::MemoryStream stream(bytes_of(c.request));
    StreamReader reader(stream);
    ImportPolicy policy;
    policy.image_size = 4096;
    auto accepted = test::run(answer_http_import(reader, policy));
    REQUIRE_FALSE(accepted);
    CHECK(text_of(stream.sent).rfind(c.status_line, 0) == 0);
  }
}
