// Text that came from outside (a peer's export name, a server's reason phrase, a file
// name) made safe to print as one line of a log or a terminal.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// `text` with every control byte (below 0x20, and 0x7f) written as \xNN, so that a
// newline cannot forge a second log line and an escape sequence cannot drive the
// terminal. Everything else passes as is, UTF-8 included; a backslash stays single, so
// the form is for people to read (the JSON outputs are the exact one).
std::string printable(std::string_view text);

}  // namespace sluice
