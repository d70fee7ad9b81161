#include "engine/net/report_limiter.hpp"

namespace sluice {

ReportLimiter::ReportLimiter(std::string what, std::chrono::seconds interval)
    : what_(std::move(what)), interval_(interval) {}

std::optional<Error> ReportLimiter::admit(const Error& e, const std::string& kind, clock::time_point now) {
  // Kinds whose interval is over and that hold nothing back are done with.
  std::erase_if(spells_, [&](const auto& entry) { return entry.second.end <= now && entry.second.held_back == 0; });
  const bool known = spells_.contains(kind);
  if (!known && spells_.size() >= max_kinds) {
    Spell& overflow = spells_[""];
    if (overflow.end <= now) overflow.end = now + interval_;
    ++overflow.held_back;
    overflow.last = e;
    return std::nullopt;
  }
  auto [at, fresh] = spells_.try_emplace(kind);
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
  for (const auto& [kind, spell] : spells_)
    if (spell.held_back > 0 && (!due || spell.end < *due)) due = spell.end;
  return due;
}

std::vector<Error> ReportLimiter::summaries(clock::time_point now, bool all) {
  std::vector<Error> lines;
  for (auto& [kind, spell] : spells_) {
    if (spell.held_back == 0 || !spell.last || (now < spell.end && !all)) continue;
    lines.push_back(Error{spell.last->code, std::to_string(spell.held_back) + " more " + what_ + " in the last " +
                                                std::to_string(interval_.count()) + " s; the last: " +
                                                spell.last->message});
    spell.held_back = 0;
    spell.last.reset();
  }
  return lines;
}

}  // namespace sluice
