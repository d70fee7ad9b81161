#include <doctest/doctest.h>

#include <chrono>
#include <ostream>  // doctest prints std::error_code through it
#include <string>

#include "engine/net/report_limiter.hpp"

using namespace sluice;
using namespace std::chrono_literals;

namespace {

Error refused(int n) {
  return Error{std::make_error_code(std::errc::device_or_resource_busy),
               "refused a connection from client " + std::to_string(n)};
}

}  // namespace

TEST_CASE("ReportLimiter: the first report in full, the rest of the interval in one line with a count") {
  ReportLimiter limiter("connections refused", 10s);
  const auto start = ReportLimiter::clock::now();
  auto first = limiter.admit(refused(1), "refused", start);
  REQUIRE(first);
  CHECK(first->message == "refused a connection from client 1");
  CHECK_FALSE(limiter.summary_due());
  for (int i = 2; i <= 40; ++i) CHECK_FALSE(limiter.admit(refused(i), "refused", start + 1s));
  REQUIRE(limiter.summary_due());
  CHECK(*limiter.summary_due() == start + 10s);
  CHECK(limiter.summaries(start + 9s, false).empty());  // not over yet

  auto lines = limiter.summaries(start + 10s, false);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].code == std::errc::device_or_resource_busy);
  CHECK(lines[0].message ==
        "39 more connections refused in the last 10 s; the last: refused a connection from client 40");
  CHECK(limiter.summaries(start + 10s, true).empty());  // said once
  CHECK_FALSE(limiter.summary_due());

  // A new interval opens with a report in full again.
  auto later = limiter.admit(refused(41), "refused", start + 11s);
  REQUIRE(later);
  CHECK(later->message == "refused a connection from client 41");
}

TEST_CASE("ReportLimiter: a report of another kind goes out in full; the end of the server says the rest") {
  ReportLimiter limiter("failed handshakes", 10s);
  const auto start = ReportLimiter::clock::now();
  const Error timeout{std::make_error_code(std::errc::timed_out), "dropped: no export chosen within 10 s"};
  const Error unknown{std::make_error_code(std::errc::no_such_file_or_directory), "client asked for unknown export 'x'"};
  CHECK(limiter.admit(timeout, timeout.message, start));
  CHECK_FALSE(limiter.admit(timeout, timeout.message, start + 1s));
  auto other = limiter.admit(unknown, unknown.message, start + 2s);
  REQUIRE(other);
  CHECK(other->message == "client asked for unknown export 'x'");
  auto lines = limiter.summaries(start + 3s, true);  // all, before its time
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].message == "1 more failed handshakes in the last 10 s; the last: dropped: no export chosen within 10 s");
}

TEST_CASE("ReportLimiter: kinds are bounded; reports of kinds beyond them share one count") {
  ReportLimiter limiter("failed handshakes", 10s);
  const auto start = ReportLimiter::clock::now();
  for (std::size_t i = 0; i < ReportLimiter::max_kinds; ++i) {
    const std::string kind = "bad option " + std::to_string(i);
    CHECK(limiter.admit(Error{std::make_error_code(std::errc::protocol_error), kind}, kind, start));
  }
  const Error beyond{std::make_error_code(std::errc::protocol_error), "bad option 9999"};
  CHECK_FALSE(limiter.admit(beyond, beyond.message, start + 1s));
  CHECK_FALSE(limiter.admit(beyond, "bad option 10000", start + 1s));
  auto lines = limiter.summaries(start + 11s, false);  // the shared count's interval began at +1 s
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].message == "2 more failed handshakes in the last 10 s; the last: bad option 9999");
  // Once their intervals are over, the kinds are forgotten and new ones go out again.
  CHECK(limiter.admit(beyond, beyond.message, start + 11s));
}
