// The unit tests' runner: doctest's, plus two verdicts doctest 2.4 does not give.
// A run in which no test case ran fails (a filter that matches nothing, such as a
// renamed file's, must not pass), and a run that skipped cases (skip.hpp) and failed
// none exits with 77, which meson reports as SKIP.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "skip.hpp"

namespace {

struct Tally {
  std::string running_case;
  bool running_case_skipped = false;
  unsigned ran = 0;
  unsigned skipped = 0;
};

Tally tally;

// Counts the cases that ran and those that skipped; reports nothing itself.
struct TallyListener : doctest::IReporter {
  explicit TallyListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    tally.running_case = data.m_name;
    tally.running_case_skipped = false;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    ++tally.ran;
    if (tally.running_case_skipped && stats.testCaseSuccess) ++tally.skipped;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}  // filtered out
};

}  // namespace

DOCTEST_REGISTER_LISTENER("tally", 1, TallyListener);

void sluice::test::skip_test(std::string_view why) {
  tally.running_case_skipped = true;
  std::printf("SKIP: %s: %.*s\n", tally.running_case.c_str(), static_cast<int>(why.size()), why.data());
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit() || status != 0) return status;  // a query (--help, --list-...), or failures
  if (tally.ran == 0) {
    std::printf("FAIL: no test case ran: the filters match none (a renamed file or case?)\n");
    return 1;
  }
  if (tally.skipped > 0) {
    std::printf("SKIP: %u of %u test cases skipped (see above), none failed\n", tally.skipped, tally.ran);
    return 77;
  }
  return 0;
}
