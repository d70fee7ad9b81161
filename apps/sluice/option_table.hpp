// One description per option (its names, its value, its help and what it does), from
// which both getopt_long's table and the command's --help are made, so the help cannot
// drift from what is parsed. Options are scanned the GNU way: they may follow the
// operands (`sluice copy a.img b.img --stats`, as with cp, qemu-img and nbdcopy) and
// `--` ends them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sluice::cli {

enum class Takes { nothing, value, optional_value };

struct OptionSpec {
  std::vector<std::string> names;  // without the dashes; aliases after the first
  Takes takes = Takes::nothing;
  // Shown after the name: "N" reads "--depth N"; one starting with '=' or '[' is
  // written as it is ("--sparse=SIZE", "--progress[=bar|json|xapi]").
  std::string value_name;
  std::string help;  // lines separated by '\n'; indented under the option
  std::function<void(const char* value)> apply;  // value is null without one
};

class OptionTable {
 public:
  // `synopsis`: the help's first lines ("usage: sluice copy [options] SRC DST", text).
  explicit OptionTable(std::string synopsis) : help_(std::move(synopsis)) {}

  OptionTable& add(OptionSpec option);
  OptionTable& add(const std::vector<OptionSpec>& options);
  // Text in the help at this point: a section heading, a footnote.
  OptionTable& text(const std::string& text);

  // The operands, in order. --help and -h print help() on stdout and exit 0; an
  // unknown option or one missing its value is a UsageError naming it, as is what an
  // option's apply throws.
  std::vector<std::string> parse(int argc, char** argv) const;

  const std::string& help() const { return help_; }

 private:
  std::vector<OptionSpec> options_;
  std::string help_;
};

}  // namespace sluice::cli
