#include "engine/net/report_limiter.hpp"

namespace sluice {

ReportLimiter::ReportLimiter(std::string what, std::chrono::seconds interval)
    : what_(std::move(what)), interval_(interval) {}

std::optional<Error> ReportLimiter::admit(const Error& e, clock::time_point now) {
  auto [at, fresh] = spells_.try_emplace(e.code);
  Spell& spell = at->second;
  if (fresh || now >= spell.end) {
    spell.end = now + interval_;
    return e;
  }
  ++spell.held_back;
  spell.last = e;
  return std::nullopt;
}

std::optional<ReportLimiter::clock::time_point> ReportLimiter::summary_due() const {
  std::optional<clock::time_point> due;
  for (const auto& [code, spell] : spells_)
    if (spell.held_back > 0 && (!due || spell.end < *due)) due = spell.end;
  return due;
}

std::vector<Error> ReportLimiter::summaries(clock::time_point now, bool all) {
  std::vector<Error> lines;
  for (auto& [code, spell] : spells_) {
    if (spell.held_back == 0 || !spell.last || (now < spell.end && !all)) continue;
    lines.push_back(Error{code, std::to_string(spell.held_back) + " more " + what_ + " in the last " +
                                    std::to_string(interval_.count()) + " s; the last: " + spell.last->message});
    spell.held_back = 0;
    spell.last.reset();
  }
  return lines;
}

}  // namespace sluice
