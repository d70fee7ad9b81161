#include <doctest/doctest.h>

#include "engine/uri.hpp"

using namespace sluice;

TEST_CASE("plain paths are not URIs") {
  CHECK_FALSE(has_scheme("/tmp/disk.img"));
  CHECK_FALSE(has_scheme("disk.img"));
  CHECK_FALSE(has_scheme("./a:b"));
  CHECK(has_scheme("null:"));
  CHECK(has_scheme("nbd+unix:///e?socket=/s"));
}

TEST_CASE("file URIs") {
  auto uri = parse_uri("file:///var/tmp/a%20b.img");
  REQUIRE(uri);
  CHECK(uri->scheme == "file");
  CHECK(uri->host.empty());
  CHECK(uri->path == "/var/tmp/a b.img");
}

TEST_CASE("NBD URIs as libnbd writes them") {
  auto uri = parse_uri("nbds://alice@example.com:10810/disk%201?tls-certificates=/etc/pki&tls-verify-peer=false");
  REQUIRE(uri);
  CHECK(uri->scheme == "nbds");
  CHECK(uri->user == "alice");
  CHECK(uri->host == "example.com");
  CHECK(uri->port == 10810);
  CHECK(uri->path == "/disk 1");
  CHECK(uri->param("tls-certificates") == "/etc/pki");
  CHECK(uri->param("tls-verify-peer") == "false");
  CHECK_FALSE(uri->param("socket"));

  uri = parse_uri("nbd+unix:///export?socket=/tmp/s.sock");
  REQUIRE(uri);
  CHECK(uri->host.empty());
  CHECK(uri->path == "/export");
  CHECK(uri->param("socket") == "/tmp/s.sock");

  uri = parse_uri("nbd://[::1]:10809/");
  REQUIRE(uri);
  CHECK(uri->host == "::1");
  CHECK(uri->authority() == "[::1]:10809");
}

TEST_CASE("Port 0 is for listening only") {
  auto peer = parse_uri("nbd://host:0/disk");
  REQUIRE_FALSE(peer);
  CHECK(peer.error().message.find("invalid port '0'") != std::string::npos);
  auto listener = parse_uri("tcp://127.0.0.1:0", PortZero::allowed);
  REQUIRE(listener);
  CHECK(listener->port == 0);
  CHECK_FALSE(parse_uri("tcp://127.0.0.1:65536", PortZero::allowed));
}

TEST_CASE("HTTP import URIs keep the raw path and query") {
  auto uri = parse_uri("https://root:secret@host/import_raw_vdi?vdi=OpaqueRef%3Aab&session_id=x");
  REQUIRE(uri);
  CHECK(uri->user == "root");
  CHECK(uri->password == "secret");
  CHECK(uri->raw_path == "/import_raw_vdi");
  CHECK(uri->raw_query == "vdi=OpaqueRef%3Aab&session_id=x");
  CHECK(uri->param("vdi") == "OpaqueRef:ab");
}

TEST_CASE("bad URIs are refused with a reason") {
  CHECK_FALSE(parse_uri("nbd://host:99999/"));
  CHECK_FALSE(parse_uri("nbd://host:x/"));
  CHECK_FALSE(parse_uri("nbd://[::1/"));
  CHECK_FALSE(parse_uri("/just/a/path"));
}
