// Text that came from outside (a peer's export name, a server's reason phrase, a file
// name) made safe to print as one line of a log or a terminal.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// `text` with every control byte (below 0x20, and 0x7f) and every C1 control
// (U+0080..U+009F) written as \xNN, so that a newline cannot forge a second log line
// and an escape sequence cannot drive the terminal; and every byte that is not part of
// well-formed UTF-8 likewise, so the result is UTF-8 (what the NBD spec asks of the
// error strings a server sends). Other UTF-8 passes as is; a backslash stays single,
// so the form is for people to read (the JSON outputs are the exact one).
std::string printable(std::string_view text);

}  // namespace sluice
