// How long connecting to a peer and the handshakes (TCP, TLS, NBD, HTTP) may take.
#pragma once

#include <chrono>
#include <string>

namespace sluice {

// Two limits bound the opening: `connect_timeout` (on by default, so a peer that accepts
// and then says nothing cannot hold a copy that has not started forever) and `timeout`
// (off by default; the user's bound on a silent peer, which holds while data moves as
// well). The smaller one that is set wins; `flag` names it for the error message.
struct OpeningLimit {
  std::chrono::seconds seconds{0};  // 0: no limit
  const char* flag = "";

  std::string describe() const { return std::to_string(seconds.count()) + " seconds (" + flag + ")"; }
};

inline OpeningLimit opening_limit(std::chrono::seconds timeout, std::chrono::seconds connect_timeout) {
  if (connect_timeout.count() > 0 && (timeout.count() == 0 || connect_timeout < timeout))
    return {connect_timeout, "--connect-timeout"};
  return {timeout, "--timeout"};
}

}  // namespace sluice
