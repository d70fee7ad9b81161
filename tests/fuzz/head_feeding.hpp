// For the HTTP head targets: feeds a parser the bytes of a connection in the pieces
// the network might make of them, checking what the parsers promise about feed():
// until the head is complete every byte is taken, then no more; a failure sticks.
#pragma once

#include <cstddef>
#include <string_view>

#include "tests/fuzz/fuzz_input.hpp"

namespace sluice::fuzz {

struct FeedVerdict {
  bool done = false;
  bool failed = false;
  std::size_t taken = 0;  // bytes that belong to the head
};

// `piece(i)` is the size of the i-th piece (at least 1).
template <class Parser, class PieceSize>
FeedVerdict feed_in_pieces(Parser& parser, std::string_view bytes, PieceSize piece) {
  FeedVerdict verdict;
  for (std::size_t i = 0, at = 0; at < bytes.size(); ++i) {
    const std::string_view next = bytes.substr(at, piece(i));
    at += next.size();
    auto taken = parser.feed(next);
    if (!accepted(taken)) {
      verdict.failed = true;
      FUZZ_REQUIRE(!parser.done());
      FUZZ_REQUIRE(!parser.feed(bytes).has_value());
      FUZZ_REQUIRE(!parser.at_end_of_stream().has_value());
      return verdict;
    }
    FUZZ_REQUIRE(*taken <= next.size());
    verdict.taken += *taken;
    if (parser.done()) {
      verdict.done = true;
      auto more = parser.feed(bytes);
      FUZZ_REQUIRE(more && *more == 0);
      FUZZ_REQUIRE(parser.at_end_of_stream().has_value());
      return verdict;
    }
    FUZZ_REQUIRE(*taken == next.size());
  }
  FUZZ_REQUIRE(verdict.taken == bytes.size());
  (void)accepted(parser.at_end_of_stream());
  return verdict;
}

// The verdicts of one input fed whole and fed in small pieces agree.
inline void require_same(const FeedVerdict& whole, const FeedVerdict& pieces) {
  FUZZ_REQUIRE(whole.done == pieces.done);
  FUZZ_REQUIRE(whole.failed == pieces.failed);
  if (whole.done) FUZZ_REQUIRE(whole.taken == pieces.taken);
}

// A complete head was taken up to and including its blank line (CRLF or bare LF line
// ends), and not a byte further: what follows is the next protocol's.
inline void require_head_end(std::string_view bytes, std::size_t taken) {
  const std::string_view head = bytes.substr(0, taken);
  FUZZ_REQUIRE(head.ends_with("\n\n") || head.ends_with("\n\r\n"));
}

}  // namespace sluice::fuzz
