// How every command scans its options: the GNU way, so options may follow the operands
// (`sluice copy a.img b.img --stats` works as users of cp, qemu-img and nbdcopy expect)
// and `--` ends them, for an operand that starts with a dash.
#pragma once

#include <getopt.h>

namespace sluice::cli {

// The short options every command takes.
inline constexpr const char* short_options = "h";

// Starts a fresh scan. optind = 0 rather than 1 because glibc then also resets the
// state it keeps while permuting, which a second scan in one process would inherit.
inline void begin_option_scan() {
  optind = 0;
  opterr = 0;
}

}  // namespace sluice::cli
