// ReportLimiter: reports that a flood of bad clients can repeat (refused connections,
// failed handshakes), kept to a line or two per interval instead of one per client.
// Reports are alike when they say the same but for the peer (the caller names the
// kind): the first of its kind in an interval is made in full, the rest of that kind
// are held back and counted, and summaries() sums them up in one line once the
// interval is over. A report of another kind (a client asking for an unknown export
// among clients that time out) still goes out. Kinds are bounded (max_kinds): beyond
// them, reports of kinds not yet seen share one count.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.hpp"

namespace sluice {

class ReportLimiter {
 public:
  using clock = std::chrono::steady_clock;

  // `what` names the held-back reports in a summary ("connections refused").
  ReportLimiter(std::string what, std::chrono::seconds interval);

  static constexpr std::size_t max_kinds = 64;

  // The report to make now for `e`, of the kind `kind`: itself if it opens an interval
  // for its kind, nothing if held back. Ask for the summaries due first: a new
  // interval does not take over what the last one held back.
  std::optional<Error> admit(const Error& e, const std::string& kind, clock::time_point now);

  // The earliest time summaries() has something to say.
  std::optional<clock::time_point> summary_due() const;

  // For each kind whose interval is over (every kind: `all`) and held some back, one
  // line counting them and quoting the last; they are forgotten.
  std::vector<Error> summaries(clock::time_point now, bool all);

 private:
  struct Spell {
    clock::time_point end;
    std::size_t held_back = 0;
    std::optional<Error> last;
  };

  std::string what_;
  std::chrono::seconds interval_;
  std::map<std::string, Spell> spells_;  // by kind; "" holds kinds beyond max_kinds
};

}  // namespace sluice
