#include "apps/sluice/progress_reporter.hpp"

#include <algorithm>
#include <string>

#include "apps/sluice/json_writer.hpp"
#include "engine/size_parse.hpp"

namespace sluice::cli {

namespace {
constexpr auto bar_interval = std::chrono::milliseconds(100);
constexpr auto json_interval = std::chrono::seconds(1);

double mib_per_second(const ProgressUpdate& u) {
  return u.seconds > 0 ? static_cast<double>(u.done) / (1024.0 * 1024.0) / u.seconds : 0.0;
}
}  // namespace

std::optional<ProgressStyle> parse_progress_style(std::string_view text, bool stderr_is_terminal) {
  if (text.empty()) return stderr_is_terminal ? ProgressStyle::bar : ProgressStyle::json;
  if (text == "bar") return ProgressStyle::bar;
  if (text == "json") return ProgressStyle::json;
  if (text == "xapi") return ProgressStyle::xapi;
  return std::nullopt;
}

int percent_done(const ProgressUpdate& u) {
  if (u.done >= u.total) return 100;
  int percent = static_cast<int>(static_cast<double>(u.done) * 100.0 / static_cast<double>(u.total));
  return percent > 99 ? 99 : percent;  // 100 only when everything is done
}

namespace {
// A failed transfer never shows 100%, not even when its last write landed and the
// flush failed, nor 100% of an unknown total when it failed before it started.
int percent_failed(const ProgressUpdate& u) {
  if (u.total == 0) return 0;
  return std::min(percent_done(u), 99);
}
}  // namespace

ProgressReporter::ProgressReporter(ProgressStyle style, std::FILE* out)
    : style_(style), out_(out ? out : (style == ProgressStyle::xapi ? stdout : stderr)) {}

void ProgressReporter::update(const ProgressUpdate& u) {
  auto now = std::chrono::steady_clock::now();
  switch (style_) {
    case ProgressStyle::none: return;
    case ProgressStyle::xapi: {
      int percent = percent_done(u);
      // 100 is said once, at the end, when the data is also flushed.
      if (percent != last_percent_ && percent < 100) {
        std::fprintf(out_, "%03d", percent);
        flush();
        last_percent_ = percent;
      }
      return;
    }
    case ProgressStyle::bar:
      if (now - last_draw_ < bar_interval) return;
      last_draw_ = now;
      draw_bar(u, percent_done(u), false);
      return;
    case ProgressStyle::json:
      // 100% is the final line's to say, once the data is also flushed.
      if (now - last_draw_ < json_interval || percent_done(u) == 100) return;
      last_draw_ = now;
      print_json(u, percent_done(u), false);
      return;
  }
}

void ProgressReporter::finish(const ProgressUpdate& u, bool success) {
  switch (style_) {
    case ProgressStyle::none: return;
    case ProgressStyle::xapi:
      if (success) {
        std::fprintf(out_, "100");
        flush();
      }
      return;
    case ProgressStyle::bar:
      draw_bar(u, success ? percent_done(u) : percent_failed(u), true);
      if (style_ == ProgressStyle::bar) std::fputc('\n', out_);
      return;
    case ProgressStyle::json: print_json(u, success ? percent_done(u) : percent_failed(u), true); return;
  }
}

void ProgressReporter::draw_bar(const ProgressUpdate& u, int percent, bool final) {
  constexpr int width = 30;
  int filled = percent * width / 100;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(width - filled), ' ');
  std::fprintf(out_, "\r[%s] %3d%%  %s / %s  %.1f MiB/s%s", bar.c_str(), percent,
               format_size(u.done).c_str(), format_size(u.total).c_str(), mib_per_second(u),
               final ? "" : "   ");
  flush();
}

void ProgressReporter::print_json(const ProgressUpdate& u, int percent, bool final) {
  JsonObject line;
  line.add("done", u.done)
      .add("total", u.total)
      .add("percent", static_cast<std::uint64_t>(percent))
      .add("seconds", u.seconds)
      .add("mib_per_second", mib_per_second(u))
      .add("final", final);
  std::fprintf(out_, "%s\n", line.str().c_str());
  flush();
}

void ProgressReporter::flush() {
  if (std::fflush(out_) == 0 && !std::ferror(out_)) return;
  // The reader went away (a closed pipe: SIGPIPE is ignored) or the output is full.
  // The copy matters more than its display: it goes on, and says so once.
  style_ = ProgressStyle::none;
  if (out_ != stderr)
    std::fputs("sluice: note: the progress output cannot be written; the copy goes on without it\n", stderr);
}

}  // namespace sluice::cli
