// Malformed-input tests for the import handshake's HTTP head parsers. A head arrives in
// whatever pieces the network makes of it, so the verdict must not depend on where the
// reads split it; and the parser must stop exactly at the blank line, because the
// bytes after it belong to the next protocol.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/http/request_parser.hpp"
#include "protocols/http/response_parser.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::test;

namespace {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string random_token(std::mt19937& rng, std::size_t max) {
  static constexpr std::string_view chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";
  std::string out(pick<std::size_t>(rng, 1, max), 'x');
  for (char& c : out) c = chars[pick<std::size_t>(rng, 0, chars.size() - 1)];
  return out;
}

// Field values: visible ASCII, spaces and tabs inside, obs-text bytes.
std::string random_value(std::mt19937& rng) {
  std::string out(pick<std::size_t>(rng, 0, 40), 'v');
  for (char& c : out) {
    const int kind = pick(rng, 0, 9);
    c = kind == 0 ? ' ' : kind == 1 ? '\t' : kind == 2 ? static_cast<char>(pick(rng, 0x80, 0xff))
                                                       : static_cast<char>(pick(rng, 0x21, 0x7e));
  }
  while (!out.empty() && (out.front() == ' ' || out.front() == '\t')) out.erase(0, 1);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  return out;
}

std::vector<std::pair<std::string, std::string>> random_fields(std::mt19937& rng) {
  std::vector<std::pair<std::string, std::string>> fields(pick<std::size_t>(rng, 0, 6));
  for (auto& [name, value] : fields) {
    name = one_in(rng, 3) ? std::string(one_in(rng, 2) ? "Transfer-Encoding" : "cookie") : random_token(rng, 20);
    value = one_in(rng, 4) ? std::string("nbd") : random_value(rng);
  }
  return fields;
}

std::string head_of(std::string start_line, const std::vector<std::pair<std::string, std::string>>& fields,
                    std::mt19937& rng) {
  std::string head = std::move(start_line) + "\r\n";
  for (const auto& [name, value] : fields)
    head += name + ":" + (one_in(rng, 2) ? " " : "") + value + (one_in(rng, 4) ? " \t" : "") + "\r\n";
  return head + "\r\n";
}

std::string random_target(std::mt19937& rng) {
  std::string target = "/";
  for (std::size_t n = pick<std::size_t>(rng, 0, 40); n > 0; --n) target += static_cast<char>(pick(rng, 0x21, 0x7e));
  return target;
}

// The bytes a peer sends: a head, then whatever protocol follows it.
struct Stream {
  std::string bytes;
  std::size_t head_size = 0;
};

Stream random_request(std::mt19937& rng) {
  const char* methods[] = {"PUT", "GET", "POST", "put"};
  std::string method = one_in(rng, 5) ? random_token(rng, 12) : methods[pick(rng, 0, 3)];
  std::string head = head_of(method + " " + random_target(rng) + " HTTP/1." + std::to_string(pick(rng, 0, 1)),
                             random_fields(rng), rng);
  return {head + as_text(random_bytes(rng, 24)), head.size()};
}

Stream random_response(std::mt19937& rng) {
  // Interim answers (1xx but 101) are skipped, so what decides is the head after
  // them; unit tests cover those, the fuzz the final answers.
  int status = one_in(rng, 4) ? pick(rng, 100, 599) : 200;
  if (status < 200 && status != 101) status += 100;
  std::string line = "HTTP/1.1 " + std::to_string(status);
  if (!one_in(rng, 5)) line += " " + random_value(rng);
  std::string head = head_of(line, random_fields(rng), rng);
  return {head + as_text(random_bytes(rng, 24)), head.size()};
}

// What a parser made of a whole stream.
struct Verdict {
  bool done = false;
  std::size_t taken = 0;        // bytes that belonged to the head
  std::optional<Error> error;   // from feed()
  std::optional<Error> at_end;  // from at_end_of_stream()
  std::string summary;          // the parsed head, flattened, to compare
};

// The error text quotes what had arrived when the parser gave up on bytes that cannot
// start a message; that excerpt depends on the split, the sentence around it must not.
std::string without_excerpt(const std::string& message) {
  const std::size_t quote = message.find("it sent '");
  return quote == std::string::npos ? message : message.substr(0, quote);
}

std::string summarise(const HttpHeaders& headers) {
  std::string out;
  for (const HttpHeader& h : headers.all()) out += h.name + "\x01" + h.value + "\x02";
  return out;
}

std::string summarise(const HttpRequestParser& parser) {
  const HttpRequestHead& r = parser.request();
  return r.method + "\x03" + r.target + "\x03" + r.version + "\x03" + summarise(r.headers);
}

std::string summarise(const HttpResponseParser& parser) {
  const HttpResponseHead& r = parser.response();
  return r.status_line + "\x03" + r.version + "\x03" + std::to_string(r.status) + "\x03" + r.reason + "\x03" +
         (r.transfer_encoding_nbd ? "nbd" : "") + "\x03" + summarise(r.headers);
}

// Feeds `bytes` cut at the given points, as a connection would deliver them.
template <class Parser>
Verdict feed_in_pieces(const std::string& bytes, std::vector<std::size_t> cuts) {
  Parser parser;
  Verdict v;
  cuts.push_back(bytes.size());
  std::sort(cuts.begin(), cuts.end());
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    auto taken = parser.feed(std::string_view(bytes).substr(from, cut - from));
    if (!taken) {
      v.error = taken.error();
      // A failed parser keeps failing with the same error.
      auto again = parser.feed(std::string_view("x"));
      REQUIRE_FALSE(again);
      CHECK(again.error().message == taken.error().message);
      break;
    }
    REQUIRE(*taken <= cut - from);
    v.taken += *taken;
    // Once done, the parser takes nothing more: the rest is the next protocol's.
    if (parser.done() && *taken < cut - from) CHECK(parser.feed(std::string_view(bytes).substr(from + *taken)) == 0u);
    from = cut;
  }
  v.done = parser.done();
  if (v.done) v.summary = summarise(parser);
  if (auto end = parser.at_end_of_stream(); !end) v.at_end = end.error();
  return v;
}

std::vector<std::size_t> random_cuts(std::mt19937& rng, std::size_t size) {
  std::vector<std::size_t> cuts;
  // Byte by byte is the harshest split, but too slow for the 64 KiB heads.
  if (size <= 4096 && one_in(rng, 4)) {
    for (std::size_t i = 1; i < size; ++i) cuts.push_back(i);
    return cuts;
  }
  for (int n = pick(rng, 1, size > 4096 ? 64 : 8); n > 0; --n) cuts.push_back(pick<std::size_t>(rng, 0, size));
  return cuts;
}

template <class Parser>
void check_split_invariance(const std::string& bytes, std::mt19937& rng) {
  const Verdict whole = feed_in_pieces<Parser>(bytes, {});
  const Verdict split = feed_in_pieces<Parser>(bytes, random_cuts(rng, bytes.size()));
  REQUIRE(split.done == whole.done);
  // Before an error, earlier pieces were taken; only a finished head has a size.
  if (whole.done) CHECK(split.taken == whole.taken);
  CHECK(split.summary == whole.summary);
  REQUIRE(split.error.has_value() == whole.error.has_value());
  if (whole.error) {
    CHECK_FALSE(whole.error->message.empty());
    CHECK(split.error->code == whole.error->code);
    CHECK(without_excerpt(split.error->message) == without_excerpt(whole.error->message));
  }
  // Either a verdict or a request for more bytes: never neither.
  if (!whole.done) REQUIRE(whole.at_end);
  if (whole.done) CHECK_FALSE(whole.at_end);
}

}  // namespace

TEST_CASE("HTTP parser fuzz: well-formed heads parse to what was sent and stop at the blank line") {
  const std::uint32_t seed = 0x4771;
  for (int iteration = 0; iteration < 1000; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    const Stream request = random_request(rng);
    INFO("request: ", quote_for_message(request.bytes, 4096));
    const Verdict r = feed_in_pieces<HttpRequestParser>(request.bytes, random_cuts(rng, request.bytes.size()));
    REQUIRE(r.done);
    CHECK(r.taken == request.head_size);
    auto parsed = parse_http_request_head(std::string_view(request.bytes).substr(0, request.head_size));
    REQUIRE(parsed);
    CHECK(starts_with(request.bytes, parsed->method + " " + parsed->target + " " + parsed->version + "\r\n"));

    const Stream response = random_response(rng);
    INFO("response: ", quote_for_message(response.bytes, 4096));
    const Verdict s = feed_in_pieces<HttpResponseParser>(response.bytes, random_cuts(rng, response.bytes.size()));
    auto head = parse_http_response_head(std::string_view(response.bytes).substr(0, response.head_size));
    REQUIRE(head);
    CHECK(starts_with(response.bytes, head->status_line + "\r\n"));
    // Only a 2xx lets the transfer go on; anything else is refused by naming it.
    REQUIRE(s.done == (head->status >= 200 && head->status <= 299));
    if (s.done) {
      CHECK(s.taken == response.head_size);
    } else {
      REQUIRE(s.error);
      CHECK(s.error->message.find(head->status_line.substr(0, 12)) != std::string::npos);
    }
  }
}

TEST_CASE("HTTP parser fuzz: every proper prefix of a head asks for more bytes") {
  const std::uint32_t seed = 0x9ef2;
  for (int iteration = 0; iteration < 150; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    const Stream request = random_request(rng);
    const Stream response = random_response(rng);
    for (std::size_t n = 0; n < request.head_size; ++n) {
      HttpRequestParser parser;
      auto taken = parser.feed(std::string_view(request.bytes).substr(0, n));
      REQUIRE(taken);
      CHECK(*taken == n);
      CHECK_FALSE(parser.done());
      auto end = parser.at_end_of_stream();
      REQUIRE_FALSE(end);
      CHECK((end.error().code == std::errc::connection_reset));
    }
    for (std::size_t n = 0; n < response.head_size; ++n) {
      HttpResponseParser parser;
      auto taken = parser.feed(std::string_view(response.bytes).substr(0, n));
      REQUIRE(taken);
      CHECK(*taken == n);
      CHECK_FALSE(parser.done());
      CHECK_FALSE(parser.at_end_of_stream());
    }
  }
}

TEST_CASE("HTTP parser fuzz: mutated heads give the same verdict however the bytes are split") {
  const std::uint32_t seed = 0x5b117;
  int done = 0;
  int failed = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    const std::string request = as_text(mutate(as_bytes(random_request(rng).bytes), rng));
    INFO("request: ", quote_for_message(request, 4096));
    check_split_invariance<HttpRequestParser>(request, rng);
    const Verdict r = feed_in_pieces<HttpRequestParser>(request, {});
    if (r.done) {
      ++done;
      // An accepted head is one that the strict rules accept on its own.
      auto again = parse_http_request_head(std::string_view(request).substr(0, r.taken));
      REQUIRE(again);
      CHECK(std::all_of(again->method.begin(), again->method.end(), is_http_token_char));
      CHECK(again->target.find_first_of(" \r\n") == std::string::npos);
      for (const HttpHeader& h : again->headers.all()) {
        CHECK(h.value.find_first_of("\r\n") == std::string::npos);
        CHECK(std::all_of(h.name.begin(), h.name.end(), is_http_token_char));
      }
    } else if (r.error) {
      ++failed;
    }

    const std::string response = as_text(mutate(as_bytes(random_response(rng).bytes), rng));
    INFO("response: ", quote_for_message(response, 4096));
    check_split_invariance<HttpResponseParser>(response, rng);
    const Verdict s = feed_in_pieces<HttpResponseParser>(response, {});
    if (s.done) {
      ++done;
      auto again = parse_http_response_head(std::string_view(response).substr(0, s.taken));
      REQUIRE(again);
      CHECK(again->status >= 200);
      CHECK(again->status <= 299);
      for (const HttpHeader& h : again->headers.all()) CHECK(h.value.find_first_of("\r\n") == std::string::npos);
    } else if (s.error) {
      ++failed;
    }
  }
  CHECK(done > 300);
  CHECK(failed > 300);
}

TEST_CASE("HTTP parser fuzz: random bytes get the same verdict however they are split") {
  const std::uint32_t seed = 0x7a4d;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    std::string noise = as_text(random_bytes(rng, 96));
    // Starting like a message gets noise past the first check, into the head rules.
    if (one_in(rng, 3)) noise = (one_in(rng, 2) ? "HTTP/1.1 " : "PUT ") + noise;
    INFO("bytes: ", quote_for_message(noise, 4096));
    check_split_invariance<HttpRequestParser>(noise, rng);
    check_split_invariance<HttpResponseParser>(noise, rng);
  }
}

TEST_CASE("HTTP parser fuzz: a head that never ends is refused at the size limit, however it is split") {
  const std::uint32_t seed = 0x64c1b;
  for (int iteration = 0; iteration < 4; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);
    std::string request = "PUT / HTTP/1.1\r\n";
    std::string response = "HTTP/1.1 200 OK\r\n";
    while (request.size() < max_http_head_size + 100) {
      const std::string line = random_token(rng, 30) + ": " + random_value(rng) + "\r\n";
      request += line;
      response += line;
    }
    // The terminator just past the limit must not rescue it.
    request += "\r\n";
    response += "\r\n";
    for (int split = 0; split < 3; ++split) {
      const Verdict r = feed_in_pieces<HttpRequestParser>(request, random_cuts(rng, request.size()));
      CHECK_FALSE(r.done);
      REQUIRE(r.error);
      CHECK((r.error->code == std::errc::message_size));
      const Verdict s = feed_in_pieces<HttpResponseParser>(response, random_cuts(rng, response.size()));
      CHECK_FALSE(s.done);
      REQUIRE(s.error);
      CHECK((s.error->code == std::errc::message_size));
    }
  }
}
