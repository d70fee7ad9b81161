// Closing a connection so that the peer can tell failure from success.
#pragma once

namespace sluice {

// Closes `fd` with an immediate reset instead of an orderly end: on TCP, SO_LINGER 0
// makes close() send RST, which the peer reads as ECONNRESET, where a FIN (close() or
// shutdown()) reads as a clean end of stream. A Unix-domain peer gets ECONNRESET when
// bytes it sent were left unread. The descriptor is closed either way.
void hard_close(int fd);

}  // namespace sluice
