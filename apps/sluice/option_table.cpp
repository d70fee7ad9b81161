#include "apps/sluice/option_table.hpp"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>

#include "apps/sluice/usage_error.hpp"

namespace sluice::cli {

namespace {

constexpr std::size_t help_column = 24;  // where an option's help text starts
constexpr int help_code = 255;  // getopt's code for --help; the options' count up from 256,
                                // clear of the characters it returns ('?', 'h')

std::string synopsis_of(const OptionSpec& option) {
  std::string out;
  for (const std::string& name : option.names) {
    if (!out.empty()) out += ", ";
    out += "--" + name;
    if (option.value_name.empty()) continue;
    const char first = option.value_name.front();
    out += first == '=' || first == '[' ? option.value_name : " " + option.value_name;
  }
  return out;
}

std::string help_entry(const OptionSpec& option) {
  std::string head = "  " + synopsis_of(option);
  std::string out;
  std::size_t start = 0;
  bool first_line = true;
  do {
    const std::size_t end = option.help.find('\n', start);
    const std::string line = option.help.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (first_line && head.size() + 2 <= help_column) {
      out += head + std::string(help_column - head.size(), ' ') + line + "\n";
    } else {
      if (first_line) out += head + "\n";
      out += std::string(help_column, ' ') + line + "\n";
    }
    first_line = false;
    start = end == std::string::npos ? std::string::npos : end + 1;
  } while (start != std::string::npos);
  return out;
}

}  // namespace

OptionTable& OptionTable::add(OptionSpec option) {
  help_ += help_entry(option);
  options_.push_back(std::move(option));
  return *this;
}

OptionTable& OptionTable::add(const std::vector<OptionSpec>& options) {
  for (const OptionSpec& option : options) add(option);
  return *this;
}

OptionTable& OptionTable::text(const std::string& text) {
  help_ += text;
  return *this;
}

std::vector<std::string> OptionTable::parse(int argc, char** argv) const {
  std::vector<struct option> table;
  for (std::size_t i = 0; i < options_.size(); ++i) {
    const int has_arg = options_[i].takes == Takes::nothing ? no_argument
                        : options_[i].takes == Takes::value ? required_argument
                                                            : optional_argument;
    for (const std::string& name : options_[i].names)
      table.push_back({name.c_str(), has_arg, nullptr, static_cast<int>(i) + help_code + 1});
  }
  table.push_back({"help", no_argument, nullptr, help_code});
  table.push_back({nullptr, 0, nullptr, 0});
  // optind = 0 rather than 1: glibc then also resets the state it keeps while
  // permuting, which a second scan in one process would inherit.
  optind = 0;
  opterr = 0;
  int code;
  while ((code = getopt_long(argc, argv, "h", table.data(), nullptr)) != -1) {
    if (code == help_code || code == 'h') {
      std::fputs(help_.c_str(), stdout);
      std::exit(exit_ok);
    }
    const auto index = static_cast<std::size_t>(code - help_code - 1);
    if (code <= help_code || index >= options_.size()) {  // '?': unknown, or a value missing
      std::string bad = optind > 0 && argv[optind - 1] ? argv[optind - 1] : "?";
      throw UsageError("unknown or incomplete option '" + bad + "'");
    }
    options_[index].apply(optarg);
  }
  return std::vector<std::string>(argv + optind, argv + argc);
}

}  // namespace sluice::cli
