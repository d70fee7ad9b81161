// ReadReplyAssembler: judges the structured reply to one READ.
//
// A server may split a read into OFFSET_DATA and OFFSET_HOLE chunks sent in any order,
// interleaved with other replies, with error chunks among them; DONE marks the last.
// This state machine checks each content chunk against the request before its payload
// is read (inside the request, not empty, not overlapping an earlier one, at most one
// with DF), records errors, and at DONE says whether the read succeeded: no error chunk
// and every byte of the request covered. It moves no data: the caller reads OFFSET_DATA
// into place and zeroes OFFSET_HOLE ranges once the assembler has accepted them.
//
// A failed add_*() or check_chunk() is the server breaking the protocol (the caller
// should drop the connection); a failed finish() after error chunks is an ordinary
// read error (the connection stays usable).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "engine/error.hpp"
#include "protocols/nbd/transmission_messages.hpp"

namespace sluice::nbd {

class ReadReplyAssembler {
 public:
  // The request: `length` bytes at `offset`; `dont_fragment` if it was sent with DF.
  ReadReplyAssembler(std::uint64_t offset, std::uint32_t length, bool dont_fragment = false);

  // Before a chunk's payload is read: the type belongs in a READ's reply and the reply
  // has not already finished.
  Status check_chunk(const ChunkHeader& header);

  // A simple reply to the READ: with structured replies negotiated the spec demands a
  // structured one, and data after a simple header could not be checked against the
  // request. One carrying an error (and so no data) is taken: it ends the read with
  // that error and leaves the stream in step.
  Status check_simple_reply(bool carries_error) const;

  // A content chunk, before its data is read or its range zeroed.
  Status add_data(const ContentRange& range);
  Status add_hole(const ContentRange& range);

  // An error chunk. The read will fail with its error; this fails only if the chunk
  // itself is malformed for this request (an offset outside it).
  Status add_error(const ErrorChunk& chunk);

  // At the chunk flagged DONE: the read's outcome. The error the server reported (the
  // one at the lowest offset if several), else a protocol error naming the first range
  // no chunk covered, else success.
  Status finish();

  bool finished() const { return finished_; }
  std::uint64_t covered_bytes() const { return covered_; }

 private:
  Status add_content(ReplyType type, const ContentRange& range);
  std::string request_text() const;

  std::uint64_t offset_;
  std::uint64_t length_;
  bool dont_fragment_;
  bool finished_ = false;
  std::uint32_t content_chunks_ = 0;
  std::uint64_t covered_ = 0;
  // Covered ranges, begin -> end relative to the request's offset, merged when they
  // touch: a well-behaved reply stays one entry however many chunks it has.
  std::map<std::uint64_t, std::uint64_t> ranges_;
  std::optional<std::uint64_t> error_offset_;
  std::optional<Error> error_;
};

}  // namespace sluice::nbd
