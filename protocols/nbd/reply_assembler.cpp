#include "protocols/nbd/reply_assembler.hpp"

#include <iterator>
#include <string>

#include "protocols/nbd/wire_text.hpp"

namespace sluice::nbd {

namespace {

tl::unexpected<Error> violation(std::string message) {
  return fail(std::errc::protocol_error, std::move(message));
}

std::string n(std::uint64_t value) { return std::to_string(value); }

}  // namespace

ReadReplyAssembler::ReadReplyAssembler(std::uint64_t offset, std::uint32_t length,
                                       bool dont_fragment)
    : offset_(offset), length_(length), dont_fragment_(dont_fragment) {}

std::string ReadReplyAssembler::request_text() const {
  return "READ of " + n(length_) + " bytes at offset " + n(offset_);
}

Status ReadReplyAssembler::check_chunk(const ChunkHeader& header) {
  if (finished_)
    return violation("NBD server sent a " + to_string(header.type) + " chunk after DONE for the " +
                     request_text());
  switch (header.type) {
    case ReplyType::none:
    case ReplyType::offset_data:
    case ReplyType::offset_hole: return {};
    default: break;
  }
  if (is_error(header.type)) return {};
  return violation("NBD server answered the " + request_text() + " with a " +
                   to_string(header.type) + " chunk");
}

Status ReadReplyAssembler::check_simple_reply(bool carries_error) const {
  if (carries_error) return {};
  return violation("NBD server answered the " + request_text() +
                   " with a simple reply carrying data, but structured replies were negotiated");
}

Status ReadReplyAssembler::add_data(const ContentRange& range) {
  return add_content(ReplyType::offset_data, range);
}

Status ReadReplyAssembler::add_hole(const ContentRange& range) {
  return add_content(ReplyType::offset_hole, range);
}

Status ReadReplyAssembler::add_content(ReplyType type, const ContentRange& range) {
  const std::string chunk = "NBD " + to_string(type) + " chunk for " + n(range.length) +
                            " bytes at offset " + n(range.offset);
  if (finished_) return violation(chunk + " arrived after DONE for the " + request_text());
  if (range.length == 0) return violation(chunk + " is empty");
  // Written so that nothing overflows whatever the server sent.
  if (range.offset < offset_ || range.offset - offset_ > length_ ||
      range.length > length_ - (range.offset - offset_))
    return violation(chunk + " lies outside the " + request_text());
  if (dont_fragment_ && content_chunks_ > 0)
    return violation(chunk + " is a second content chunk for the " + request_text() +
                     ", sent with DF");

  // Kept relative to the request, so that a request ending exactly at 2^64 (its end
  // does not fit in 64 bits) merges and checks overlaps like any other.
  const std::uint64_t begin = range.offset - offset_;
  const std::uint64_t end = begin + range.length;
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first < end)
    return violation(chunk + " overlaps bytes [" + n(offset_ + next->first) + ", " + n(offset_ + next->second) +
                     ") already received");
  auto prev = next == ranges_.begin() ? ranges_.end() : std::prev(next);
  if (prev != ranges_.end() && prev->second > begin)
    return violation(chunk + " overlaps bytes [" + n(offset_ + prev->first) + ", " + n(offset_ + prev->second) +
                     ") already received");

  ++content_chunks_;
  covered_ += range.length;
  std::uint64_t merged_begin = begin;
  std::uint64_t merged_end = end;
  if (next != ranges_.end() && next->first == end) {
    merged_end = next->second;
    ranges_.erase(next);
  }
  if (prev != ranges_.end() && prev->second == begin) {
    prev->second = merged_end;
    return {};
  }
  ranges_.emplace(merged_begin, merged_end);
  return {};
}

Status ReadReplyAssembler::add_error(const ErrorChunk& chunk) {
  if (finished_)
    return violation("NBD error chunk arrived after DONE for the " + request_text());
  const std::uint64_t at = chunk.offset.value_or(offset_);
  if (chunk.offset && (at < offset_ || at - offset_ >= length_))
    return violation("NBD ERROR_OFFSET chunk names offset " + n(at) + ", outside the " +
                     request_text());
  if (error_ && error_offset_ && *error_offset_ <= at) return {};

  const std::error_code code = to_error_code(chunk.error);
  std::string text = "NBD server: ";
  text += chunk.offset ? "READ at offset " + n(at) + " (of " + n(length_) + " bytes at offset " +
                             n(offset_) + ")"
                       : request_text();
  text += " failed with " + to_string(chunk.error) + " (" + code.message() + ")";
  if (!chunk.message.empty()) text += ": " + printable(chunk.message, max_string_length);
  error_ = Error{code, std::move(text)};
  error_offset_ = at;
  return {};
}

Status ReadReplyAssembler::finish() {
  if (finished_) return violation("NBD server sent DONE twice for the " + request_text());
  finished_ = true;
  if (error_) return tl::unexpected(*error_);
  if (covered_ == length_) return {};
  // Find the first gap for the message.
  std::uint64_t gap_begin = 0;
  std::uint64_t gap_end = length_;
  for (const auto& [begin, end] : ranges_) {
    if (begin > gap_begin) {
      gap_end = begin;
      break;
    }
    gap_begin = end;
  }
  return violation("NBD server finished the " + request_text() + " leaving bytes [" +
                   n(offset_ + gap_begin) + ", " + n(offset_ + gap_end) + ") uncovered (" + n(length_ - covered_) +
                   " bytes missing)");
}

}  // namespace sluice::nbd
