// How `sluice copy --progress` shows progress:
//   bar   a redrawn bar on stderr (the default on a terminal)
//   json  one JSON object per line on stderr (the default otherwise)
//   xapi  xen-api's form: three ASCII digits 000..100 on stdout, no separators, written
//         when the integer percentage changes (what xapi's vhd_tool_wrapper reads)
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string_view>

#include "engine/copy_options.hpp"

namespace sluice::cli {

enum class ProgressStyle { none, bar, json, xapi };

// Parses "bar", "json", "xapi"; empty picks bar on a terminal, json otherwise.
std::optional<ProgressStyle> parse_progress_style(std::string_view text, bool stderr_is_terminal);

class ProgressReporter {
 public:
  explicit ProgressReporter(ProgressStyle style, std::FILE* out = nullptr);

  void update(const ProgressUpdate& update);
  // The last word: on success the bar reaches 100% and xapi prints "100".
  void finish(const ProgressUpdate& update, bool success);

 private:
  void draw_bar(const ProgressUpdate& update, int percent, bool final);
  void print_json(const ProgressUpdate& update, int percent, bool final);
  // Flushes; on a write error stops reporting for the rest of the copy.
  void flush();

  ProgressStyle style_;
  std::FILE* out_;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
};

// Integer percentage of completed work, as vhd-tool computes it (rounded down).
int percent_done(const ProgressUpdate& update);

}  // namespace sluice::cli
