#include "protocols/nbd/server/transmission.hpp"

#include <algorithm>
#include <utility>
#include <vector>


namespace sluice::nbd {

namespace {

// Payload bytes are counted against a connection's budget in units of this size (one
// credit each), by the size class of the buffer a request takes.
constexpr std::size_t byte_unit = 256 * 1024;
constexpr std::size_t smallest_class = 4096;
// Holes shorter than this are sent as data: the chunk header would cost about as much,
// and a data chunk after a hole finds room for its header in the hole's bytes.
constexpr std::uint64_t min_hole = 512;

std::size_t class_index(std::size_t length) {
  std::size_t index = 0;
  while ((smallest_class << index) < length) ++index;
  return index;
}

// Byte credits for a payload of `length`: its size class's, so that the buffers the
// credits allow always fit.
std::size_t units_for(std::size_t length) {
  return std::max<std::size_t>(1, (smallest_class << class_index(length)) / byte_unit);
}

std::uint32_t allocation_flags(ExtentKind kind) {
  switch (kind) {
    case ExtentKind::hole: return allocation_state::hole | allocation_state::zero;
    case ExtentKind::zero: return allocation_state::zero;
    case ExtentKind::data: return 0;
  }
  return 0;
}

}  // namespace

// Credits taken from one Credits object, all handed back when the lease goes.
class Transmission::Lease {
 public:
  explicit Lease(Credits& credits) : credits_(&credits) {}
  Lease(Lease&& other) noexcept : credits_(other.credits_), count_(std::exchange(other.count_, 0)) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    for (; count_ > 0; --count_) credits_->release();
  }
  awaitable<Status> take(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      if (Status got = co_await credits_->acquire(); !got) co_return got;
      ++count_;
    }
    co_return Status{};
  }

 private:
  Credits* credits_;
  std::size_t count_ = 0;
};

// A pipe from the connection's pool. release(true) hands it back for reuse once it was
// emptied; a lease that goes without that closes the pipe, which may still hold bytes.
class Transmission::PipeLease {
 public:
  PipeLease() = default;
  PipeLease(PipePool& pool, Pipe* pipe) : pool_(&pool), pipe_(pipe) {}
  PipeLease(PipeLease&& other) noexcept : pool_(other.pool_), pipe_(std::exchange(other.pipe_, nullptr)) {}
  PipeLease& operator=(PipeLease&& other) noexcept {
    if (this != &other) {
      release(false);
      pool_ = other.pool_;
      pipe_ = std::exchange(other.pipe_, nullptr);
    }
    return *this;
  }
  ~PipeLease() { release(false); }

  Pipe* get() const { return pipe_; }
  explicit operator bool() const { return pipe_ != nullptr; }
  void release(bool emptied) {
    if (pipe_ != nullptr) pool_->release(std::exchange(pipe_, nullptr), emptied);
  }

 private:
  PipePool* pool_ = nullptr;
  Pipe* pipe_ = nullptr;
};

struct Transmission::Request {
  RequestHeader header;
  std::uint64_t arrival;  // its key in in_flight_
  Lease slot;   // one of the connection's request credits
  Lease bytes;  // the payload's share of the byte budget
  std::optional<Refusal> refusal;
  Buffer buffer;  // the WRITE payload, or where a READ's data goes
  PipeLease pipe;  // instead of `buffer`: the WRITE payload, waiting in a pipe
};

Transmission::Transmission(executor ex, Stream& stream, const Negotiated& negotiated, const ServerConfig& config,
                           std::function<void()> interrupt_reading)
    : ex_(ex),
      stream_(stream),
      image_(*negotiated.chosen->image),
      export_name_(negotiated.chosen->name),
      config_(config),
      allocation_context_id_(negotiated.allocation_context_id),
      interrupt_reading_(std::move(interrupt_reading)),
      reader_(stream),
      requests_(ex, std::max<std::size_t>(config.max_requests_in_flight, 1)),
      // Room for at least one request of the largest size, whatever was configured.
      byte_units_(ex, std::max<std::size_t>(config.max_bytes_in_flight, 32u << 20) / byte_unit),
      piped_reads_(config.zero_copy && stream.splices() && negotiated.chosen->image->reads_into_pipes()),
      pipes_(ex, std::max<std::size_t>(config.pipes, 1)),
      // A client that neither finishes nor reads its replies must not hold the server.
      grace_(ex, config.shutdown_grace, [this] { cut_off(); }) {
  terms_.size = image_.size();
  terms_.flags = negotiated.flags;
  terms_.block_sizes = image_.traits().block_sizes;
  terms_.structured_replies = negotiated.structured_replies;
  terms_.allocation_context = negotiated.allocation_context;
  piped_writes_ = config.zero_copy && stream.splices() && image_.writes_from_pipes();
}

Transmission::~Transmission() = default;

awaitable<Status> Transmission::run() {
  TaskGroup handlers(ex_, [this](const Error&) {
    // A reply could not be sent: the connection is gone. Stop reading too.
    stream_.abort();
    requests_.close();
    byte_units_.close();
    pipes_.close();
  });
  Status reading = co_await read_requests(handlers);
  if (!reading && !stopping_) {
    // A protocol violation or a lost connection: replies still owed cannot be relied
    // on to leave (the peer may not read them), so the connection is closed hard. The
    // handlers still finish their work on the image first.
    stream_.abort();
  }
  Status handled = co_await handlers.join();
  grace_.end();
  if (cut_off_) co_return tl::unexpected(*cut_off_);
  // A reply that could not be sent (the client went away mid-READ) aborts the stream,
  // and the read that cuts short reports only the abort: the handler's error says why.
  if (!reading && reading.error().is_cancellation() && !handled && !handled.error().is_cancellation())
    co_return handled;
  if (!reading && !(stopping_ && (interrupted_ || reading.error().is_cancellation()))) co_return reading;
  if (!handled && !handled.error().is_cancellation()) co_return handled;
  co_return Status{};
}

void Transmission::stop() {
  if (stopping_) return;
  stopping_ = true;
  if (in_flight_.empty()) interrupt();
  grace_.start();
}

void Transmission::cut_off() {
  cut_off_ = cut_off_error();
  interrupt();
  stream_.abort();
  requests_.close();
  byte_units_.close();
}

// Names the connection's export and its oldest requests (a client may have hundreds).
Error Transmission::cut_off_error() const {
  constexpr std::size_t named = 4;
  std::string text = "export '" + export_name_ + "': cut off " + describe_grace(grace_.length()) +
                     " after the server began to stop (its grace period), with " +
                     std::to_string(in_flight_.size()) + (in_flight_.size() == 1 ? " request" : " requests") +
                     " outstanding";
  std::size_t listed = 0;
  for (const auto& [arrival, header] : in_flight_) {
    if (listed == named) {
      text += ", and " + std::to_string(in_flight_.size() - named) + " more";
      break;
    }
    text += listed++ == 0 ? ": " : "; ";
    text += to_string(header.command) + " of " + std::to_string(header.length) + " bytes at offset " +
            std::to_string(header.offset);
    text += arriving_ == arrival ? " (its payload still arriving)" : " (not yet answered)";
  }
  return Error{std::make_error_code(std::errc::timed_out), std::move(text)};
}

void Transmission::interrupt() {
  if (interrupted_) return;
  interrupted_ = true;
  if (interrupt_reading_) interrupt_reading_();
}

void Transmission::request_done(std::uint64_t arrival) {
  ++served_;
  request_dropped(arrival);
}

void Transmission::request_dropped(std::uint64_t arrival) {
  in_flight_.erase(arrival);
  if (stopping_ && in_flight_.empty()) interrupt();
}

Transmission::InFlightUntilHandled::~InFlightUntilHandled() {
  if (!handed_over) transmission.request_dropped(arrival);
}

awaitable<Result<Buffer>> Transmission::buffer_for(std::size_t length, Lease& bytes) {
  if (Status got = co_await bytes.take(units_for(length)); !got) co_return tl::unexpected(got.error());
  co_return co_await pooled_buffer(length);
}

awaitable<Result<Buffer>> Transmission::pooled_buffer(std::size_t length) {
  const std::size_t index = class_index(length);
  if (!pools_[index]) {
    const std::size_t size = smallest_class << index;
    const std::size_t budget = std::max<std::size_t>(config_.max_bytes_in_flight, 32u << 20);
    // The byte credits already bound how many of this class can be out at once.
    const std::size_t count =
        std::min(std::max<std::size_t>(config_.max_requests_in_flight, 1), std::max<std::size_t>(budget / size, 1));
    pools_[index] = std::make_unique<BufferPool>(ex_, count, size);
  }
  auto buffer = co_await pools_[index]->acquire();
  if (!buffer) co_return tl::unexpected(buffer.error());
  buffer->truncate(length);
  co_return std::move(*buffer);
}

awaitable<Status> Transmission::read_requests(TaskGroup& handlers) {
  for (;;) {
    Lease slot(requests_);
    if (Status got = co_await slot.take(1); !got) co_return got;
    auto next = co_await reader_.next();
    if (!next) co_return tl::unexpected(next.error());
    if (!*next) co_return Status{};  // the client closed the connection
    const RequestHeader& header = **next;
    if (header.command == Command::disc) co_return Status{};  // in-flight work finishes in run()
    // In flight from its header on: a shutdown that comes while a WRITE's payload is
    // still arriving waits for it (within the grace) and answers it, rather than
    // closing on a request the client has already sent.
    const std::uint64_t arrival = arrivals_++;
    in_flight_.emplace(arrival, header);
    InFlightUntilHandled counted{*this, arrival};

    auto request =
        std::make_unique<Request>(Request{header, arrival, std::move(slot), Lease(byte_units_), {}, {}, {}});
    request->refusal = check_request(header, terms_);
    if (!request->refusal && stopping_)
      request->refusal = Refusal{Errno::eshutdown, "the server is shutting down"};

    const bool carries_payload = header.command == Command::write;
    if (carries_payload && header.length > 0) arriving_ = arrival;
    const bool needs_buffer = !request->refusal && header.length > 0 &&
                              (header.command == Command::write || header.command == Command::read);
    bool payload_taken = false;
    if (needs_buffer && header.command == Command::write && writes_by_pipe(header)) {
      if (Status got = co_await receive_payload_piped(*request); !got) co_return got;
      payload_taken = true;
    } else if (needs_buffer && header.command == Command::read && reads_by_pipe(header)) {
      // No buffer, but the bytes still count against the connection's budget.
      if (Status got = co_await request->bytes.take(units_for(header.length)); !got) co_return got;
    } else if (needs_buffer) {
      auto buffer = co_await buffer_for(header.length, request->bytes);
      if (!buffer) co_return tl::unexpected(buffer.error());
      request->buffer = std::move(*buffer);
    }
    if (carries_payload && !payload_taken && header.length > 0) {
      // A refused WRITE's payload is still on the wire: read past it to stay in step.
      // (Not a conditional expression: g++ 12 destroys a co_await's result twice there.)
      Status got;
      if (request->refusal)
        got = co_await reader_.skip(header.length);
      else
        got = co_await reader_.payload(request->buffer.writable());
      if (!got) co_return got;
    }
    arriving_.reset();
    counted.handed_over = true;  // handle() calls request_done()
    handlers.spawn(handle(std::move(request)));
  }
}

awaitable<Status> Transmission::receive_payload_piped(Request& request) {
  const std::size_t length = request.header.length;
  if (Status got = co_await request.bytes.take(units_for(length)); !got) co_return got;
  auto pipe = co_await pipes_.acquire();
  if (!pipe && pipe.error().is_cancellation()) co_return tl::unexpected(pipe.error());
  if (!pipe) {
    // No pipe to be had (out of descriptors): this payload goes through memory.
    auto buffer = co_await pooled_buffer(length);
    if (!buffer) co_return tl::unexpected(buffer.error());
    request.buffer = std::move(*buffer);
    co_return co_await reader_.payload(request.buffer.writable());
  }
  PipeLease lease(pipes_, *pipe);
  std::size_t moved = 0;
  if (length <= (*pipe)->capacity()) {
    auto spliced = co_await reader_.payload_to_pipe(**pipe, length);
    if (!spliced) co_return tl::unexpected(spliced.error());  // the pipe is closed, not reused
    moved = *spliced;
    if (moved == length) {
      request.pipe = std::move(lease);
      co_return Status{};
    }
  }
  // The pipe filled up with small socket fragments (or came out smaller than planned):
  // what it holds and the rest of the payload go through memory.
  auto buffer = co_await pooled_buffer(length);
  if (!buffer) co_return tl::unexpected(buffer.error());
  request.buffer = std::move(*buffer);
  if (Status taken = (*pipe)->take(request.buffer.writable().first(moved)); !taken) co_return taken;
  lease.release(true);
  co_return co_await reader_.payload(request.buffer.writable().subspan(moved));
}

awaitable<Status> Transmission::handle(std::unique_ptr<Request> request) {
  const RequestHeader& h = request->header;
  Status sent;
  if (request->refusal) {
    sent = co_await reply_error(h, request->refusal->error, request->refusal->message);
  } else {
    using namespace command_flag;
    const bool fua = (h.flags & command_flag::fua) != 0;
    Status done;
    bool writes = false;
    switch (h.command) {
      case Command::read: sent = co_await serve_read(*request); break;
      case Command::block_status: sent = co_await serve_block_status(*request); break;
      case Command::write:
        if (h.length == 0) {
          // Unspecified by the protocol, and harmless: nothing to write.
          done = Status{};
        } else if (request->pipe) {
          done = co_await image_.write_from_pipe(h.offset, h.length, request->pipe.get()->read_end(), fua);
          request->pipe.release(bool(done));
        } else {
          done = co_await image_.write(h.offset, request->buffer.bytes(), fua);
        }
        writes = true;
        break;
      case Command::flush: done = co_await image_.flush(); break;
      case Command::trim:
        done = co_await image_.trim(h.offset, h.length, fua);
        writes = true;
        break;
      case Command::write_zeroes:
        done = co_await image_.zero(
            h.offset, h.length,
            ZeroRequest{(h.flags & no_hole) == 0, (h.flags & fast_zero) != 0, fua});
        writes = true;
        break;
      case Command::cache: done = co_await image_.cache(h.offset, h.length); break;
      default: done = fail(std::errc::invalid_argument, "unexpected command"); break;
    }
    if (h.command != Command::read && h.command != Command::block_status) {
      if (done) {
        if (writes) wrote_ = true;
        sent = co_await reply_ok(h.cookie);
      } else {
        sent = co_await reply_error(h, to_nbd_errno(done.error().code), done.error().message);
      }
    }
  }
  const std::uint64_t arrival = request->arrival;
  request.reset();  // the buffer and the credits go back before the next request needs them
  request_done(arrival);
  co_return sent;
}

awaitable<Status> Transmission::reply_ok(std::uint64_t cookie) {
  auto header = encode_simple_reply_header(SimpleReplyHeader{Errno::none, cookie});
  co_return co_await stream_.send(Frame{{}, header});
}

awaitable<Status> Transmission::reply_error(const RequestHeader& request, Errno error, const std::string& message) {
  if (terms_.structured_replies) {
    // Structured replies carry the reason as text for the person at the client.
    auto chunk = encode_error_chunk(request.cookie, reply_flag::done, error, message);
    co_return co_await stream_.send(Frame{{}, chunk});
  }
  auto header = encode_simple_reply_header(SimpleReplyHeader{error, request.cookie});
  co_return co_await stream_.send(Frame{{}, header});
}

awaitable<Status> Transmission::serve_read(Request& request) {
  const RequestHeader& h = request.header;
  if (h.length == 0) {
    if (terms_.structured_replies) {
      auto none = encode_none_chunk(h.cookie);
      co_return co_await stream_.send(Frame{{}, none});
    }
    co_return co_await reply_ok(h.cookie);
  }
  Buffer& buffer = request.buffer;

  // Plain replies, and reads the client wants in one piece, carry every byte.
  const bool whole = !terms_.structured_replies || (h.flags & command_flag::df) != 0 ||
                     !image_.traits().can_extents;
  if (whole) {
    if (Status got = co_await image_.read(h.offset, buffer.writable()); !got)
      co_return co_await reply_error(h, to_nbd_errno(got.error().code), got.error().message);
    if (terms_.structured_replies) {
      encode_offset_data_header(h.cookie, reply_flag::done, h.offset, h.length,
                                buffer.prefix(offset_data_header_size).first<offset_data_header_size>());
      co_return co_await stream_.send(Frame{{}, buffer.with_prefix(offset_data_header_size)});
    }
    encode_simple_reply_header(SimpleReplyHeader{Errno::none, h.cookie},
                               buffer.prefix(simple_reply_header_size).first<simple_reply_header_size>());
    co_return co_await stream_.send(Frame{{}, buffer.with_prefix(simple_reply_header_size)});
  }

  // Structured: data where the image has data, OFFSET_HOLE chunks for its holes.
  std::vector<ReadRun> runs;
  auto extents = co_await image_.extents(h.offset, h.length);
  std::uint64_t covered = 0;
  if (extents) {
    for (const Extent& e : *extents) {
      if (e.offset != h.offset + covered) break;  // not contiguous: read the rest
      bool hole = e.reads_as_zero() && e.length >= min_hole;
      if (!runs.empty() && runs.back().hole == hole)
        runs.back().length += e.length;
      else
        runs.push_back(ReadRun{covered, e.length, hole});
      covered += e.length;
    }
  }
  if (covered < h.length) {
    if (!runs.empty() && !runs.back().hole)
      runs.back().length += h.length - covered;
    else
      runs.push_back(ReadRun{covered, h.length - covered, false});
  }
  if (reads_by_pipe(h)) co_return co_await send_runs_piped(h, runs);
  for (const ReadRun& run : runs) {
    if (run.hole) continue;
    auto into = buffer.writable().subspan(run.from, run.length);
    if (Status got = co_await image_.read(h.offset + run.from, into); !got)
      co_return co_await reply_error(h, to_nbd_errno(got.error().code), got.error().message);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ReadRun& run = runs[i];
    const std::uint16_t flags = i + 1 == runs.size() ? reply_flag::done : 0;
    const auto length = static_cast<std::uint32_t>(run.length);
    Status sent;
    if (run.hole) {
      auto chunk = encode_offset_hole(h.cookie, flags, h.offset + run.from, length);
      sent = co_await stream_.send(Frame{{}, chunk});
    } else {
      // The chunk header goes just in front of the data: in the block's headroom for
      // the first run, else in the (unsent) bytes of the hole before it.
      Buffer part = buffer.share(run.from, run.length, offset_data_header_size);
      encode_offset_data_header(h.cookie, flags, h.offset + run.from, length,
                                part.prefix(offset_data_header_size).first<offset_data_header_size>());
      sent = co_await stream_.send(Frame{{}, part.with_prefix(offset_data_header_size)});
    }
    if (!sent) co_return sent;
  }
  co_return Status{};
}

awaitable<Status> Transmission::send_runs_piped(const RequestHeader& h, const std::vector<ReadRun>& runs) {
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ReadRun& run = runs[i];
    const bool last = i + 1 == runs.size();
    Status sent;
    if (run.hole) {
      auto chunk = encode_offset_hole(h.cookie, last ? reply_flag::done : 0, h.offset + run.from,
                                      static_cast<std::uint32_t>(run.length));
      sent = co_await stream_.send(Frame{{}, chunk});
    } else {
      bool ended = false;
      sent = co_await send_data_piped(h, run.from, run.length, last, ended);
      if (sent && ended) co_return Status{};  // an error chunk carried DONE: nothing may follow
    }
    if (!sent) co_return sent;
  }
  co_return Status{};
}

bool Transmission::writes_by_pipe(const RequestHeader& h) const {
  // A WRITE larger than a pipe does not wait for one it could not use.
  return piped_writes_ && h.length <= Pipe::planned_capacity();
}

bool Transmission::reads_by_pipe(const RequestHeader& h) const {
  // Structured replies may split a read into several data chunks, one per pipeful; a
  // simple reply or DF must be one piece, and those come from memory.
  return piped_reads_ && terms_.structured_replies && (h.flags & command_flag::df) == 0 &&
         image_.traits().can_extents;
}

// Sends [from, from + length) of the request as OFFSET_DATA chunks of at most a
// pipeful each. A read error before a chunk's header went out becomes an error chunk
// (the reply ends there, as the spec allows after earlier chunks) and sets `ended`.
awaitable<Status> Transmission::send_data_piped(const RequestHeader& h, std::uint64_t from, std::uint64_t length,
                                                bool last_run, bool& ended) {
  while (length > 0) {
    auto pipe = co_await pipes_.acquire();
    if (!pipe && pipe.error().is_cancellation()) co_return tl::unexpected(pipe.error());
    if (!pipe) co_return co_await send_data_buffered(h, from, length, last_run, ended);
    const auto piece = static_cast<std::uint32_t>(std::min<std::uint64_t>(length, (*pipe)->capacity()));
    if (Status got = co_await image_.read_into_pipe(h.offset + from, piece, (*pipe)->write_end()); !got) {
      pipes_.release(*pipe, false);
      ended = true;
      co_return co_await reply_error(h, to_nbd_errno(got.error().code), got.error().message);
    }
    const bool done = last_run && piece == length;
    std::array<std::byte, offset_data_header_size> header{};
    encode_offset_data_header(h.cookie, done ? reply_flag::done : 0, h.offset + from, piece, header);
    Frame frame{header, {}};
    frame.piped = PipedBytes{(*pipe)->read_end(), piece};
    Status sent = co_await stream_.send(frame);
    pipes_.release(*pipe, bool(sent));
    if (!sent) co_return sent;
    from += piece;
    length -= piece;
  }
  co_return Status{};
}

// send_data_piped's way out when no pipe can be had (out of descriptors): the rest of
// the run read into a pool buffer and sent as one chunk, so the client still gets its
// data and the connection goes on.
awaitable<Status> Transmission::send_data_buffered(const RequestHeader& h, std::uint64_t from, std::uint64_t length,
                                                   bool last_run, bool& ended) {
  auto buffer = co_await pooled_buffer(static_cast<std::size_t>(length));
  if (!buffer) co_return tl::unexpected(buffer.error());
  if (Status got = co_await image_.read(h.offset + from, buffer->writable()); !got) {
    ended = true;
    co_return co_await reply_error(h, to_nbd_errno(got.error().code), got.error().message);
  }
  encode_offset_data_header(h.cookie, last_run ? reply_flag::done : 0, h.offset + from,
                            static_cast<std::uint32_t>(length),
                            buffer->prefix(offset_data_header_size).first<offset_data_header_size>());
  co_return co_await stream_.send(Frame{{}, buffer->with_prefix(offset_data_header_size)});
}

awaitable<Status> Transmission::serve_block_status(Request& request) {
  const RequestHeader& h = request.header;
  auto extents = co_await image_.extents(h.offset, h.length);
  if (!extents) co_return co_await reply_error(h, to_nbd_errno(extents.error().code), extents.error().message);
  std::vector<BlockStatusDescriptor> descriptors;
  for (const Extent& e : *extents) {
    const std::uint32_t flags = allocation_flags(e.kind);
    const auto length = static_cast<std::uint32_t>(e.length);
    if (!descriptors.empty() && descriptors.back().flags == flags)
      descriptors.back().length += length;
    else
      descriptors.push_back(BlockStatusDescriptor{length, flags});
  }
  if ((h.flags & command_flag::req_one) && descriptors.size() > 1) descriptors.resize(1);
  auto chunk = encode_block_status(h.cookie, reply_flag::done, allocation_context_id_, descriptors);
  if (!chunk) co_return co_await reply_error(h, Errno::eio, chunk.error().message);
  co_return co_await stream_.send(Frame{{}, *chunk});
}

}  // namespace sluice::nbd
