// Malformed-input tests for the NBD server's option haggling, driven through an
// in-memory stream. Whatever a client sends, every option it completed gets an answer
// for that option ending in ACK or an error (and an error whenever its data is
// malformed), the server stops talking once the handshake is over, and the coroutine
// finishes: with an export, with a clean close, or with an error.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <random>
#include <string>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"
#include "protocols/nbd/server/handshake.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/memory_stream.hpp"
#include "tests/unit/wire_bytes.hpp"

using namespace sluice;
using namespace sluice::nbd;
using namespace sluice::test;

namespace {

constexpr std::uint64_t image_size = 1u << 20;

// The handshake asks an image only for its size and traits.
class SizeOnlyImage final : public Image {
 public:
  std::uint64_t size() const override { return image_size; }
  ImageTraits traits() const override { return {}; }
  std::string describe() const override { return "size only"; }
  awaitable<Status> read(std::uint64_t offset, std::span<std::byte>) override { co_return unused(offset); }
  awaitable<Status> write(std::uint64_t offset, std::span<const std::byte>, bool) override { co_return unused(offset); }
  awaitable<Status> zero(std::uint64_t offset, std::uint64_t, ZeroRequest) override { co_return unused(offset); }
  awaitable<Status> trim(std::uint64_t offset, std::uint64_t, bool) override { co_return unused(offset); }
  awaitable<Status> flush() override { co_return unused(0); }
  awaitable<Status> cache(std::uint64_t offset, std::uint64_t) override { co_return unused(offset); }
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t offset, std::uint64_t) override {
    co_return unused(offset);
  }

 private:
  static tl::unexpected<Error> unused(std::uint64_t offset) {
    return fail_at("the handshake touching the image", offset, std::make_error_code(std::errc::not_supported));
  }
};

using Outcome = Result<std::optional<Negotiated>>;

awaitable<void> drive(std::unique_ptr<Stream>& stream, const ServerConfig& config, std::optional<Outcome>& out) {
  ServingGate gate;  // always lets in
  Outcome result = co_await negotiate(stream, config, gate);
  out.emplace(std::move(result));
}

// Runs the handshake for at most a few seconds of wall time: the memory stream never
// blocks, so anything still running by then is looping.
std::optional<Outcome> run_bounded(asio::io_context& context, std::unique_ptr<Stream>& stream,
                                   const ServerConfig& config) {
  std::optional<Outcome> out;
  std::exception_ptr failure;
  asio::co_spawn(context, drive(stream, config, out), [&](std::exception_ptr e) { failure = e; });
  context.run_for(std::chrono::seconds(5));
  context.restart();
  if (failure) std::rethrow_exception(failure);
  return out;
}

std::string random_name(std::mt19937& rng) {
  switch (pick(rng, 0, 4)) {
    case 0: return "";
    case 1:
    case 2: return "disk";
    case 3: return std::string("di\0sk", 5);
    default: return as_text(random_bytes(rng, 12));
  }
}

struct SentOption {
  Option option = Option::abort;
  Bytes data;
};

// An option a client might send: well-formed, with damaged data, or unknown.
SentOption random_option(std::mt19937& rng) {
  SentOption o;
  o.option = static_cast<Option>(one_in(rng, 6) ? static_cast<std::uint32_t>(rng()) : pick<std::uint32_t>(rng, 1, 11));
  const std::string name = random_name(rng);
  switch (o.option) {
    case Option::export_name: o.data = as_bytes(name); break;
    case Option::info:
    case Option::go: {
      std::vector<InfoType> requests(pick<std::size_t>(rng, 0, 4));
      for (InfoType& t : requests) t = static_cast<InfoType>(pick(rng, 0, 5));
      auto m = encode_info_option(o.option, name, requests);
      if (m) o.data.assign(m->begin() + option_header_size, m->end());
      break;
    }
    case Option::list_meta_context:
    case Option::set_meta_context: {
      std::vector<std::string> queries(pick<std::size_t>(rng, 0, 3));
      for (std::string& q : queries) q = one_in(rng, 2) ? "base:allocation" : (one_in(rng, 2) ? "base:" : name);
      auto m = encode_meta_context_option(o.option, name, queries);
      if (m) o.data.assign(m->begin() + option_header_size, m->end());
      break;
    }
    default:
      if (one_in(rng, 4)) o.data = random_bytes(rng, 16);
      break;
  }
  if (one_in(rng, 3)) o.data = mutate(std::move(o.data), rng);
  return o;
}

// Data the server must refuse with an error reply rather than act on.
bool malformed_data(const SentOption& o) {
  switch (o.option) {
    case Option::info:
    case Option::go: return !decode_info_option(o.data);
    case Option::list_meta_context:
    case Option::set_meta_context: return !decode_meta_context_option(o.data);
    case Option::list:
    case Option::structured_reply: return !o.data.empty();
    default: return false;
  }
}

struct Reply {
  std::uint32_t option = 0;
  std::uint32_t type = 0;
  Bytes payload;
};

bool is_final(const Reply& r) { return r.type == 1 || (r.type & 0x80000000u) != 0; }

}  // namespace

TEST_CASE("NBD server handshake fuzz: random options get answers, and the handshake always ends") {
  const std::uint32_t seed = 0x4a4d;
  asio::io_context context(1);
  int chosen = 0;
  int closed = 0;
  int failed = 0;
  int error_replies = 0;
  for (int iteration = 0; iteration < 400; ++iteration) {
    CAPTURE(seed);
    CAPTURE(iteration);
    std::mt19937 rng = iteration_rng(seed, iteration);

    // Unknown client flags must end the handshake before any option is read.
    const bool bad_flags = one_in(rng, 10);
    const std::uint32_t client_flags =
        bad_flags ? static_cast<std::uint32_t>(rng() | 4u) : static_cast<std::uint32_t>(rng() & 3);
    const bool tls_required = one_in(rng, 8);
    std::vector<SentOption> options(pick<std::size_t>(rng, 1, 8));
    for (SentOption& o : options) o = random_option(rng);

    Bytes input;
    const auto flags_bytes = encode_client_flags(client_flags);
    input.insert(input.end(), flags_bytes.begin(), flags_bytes.end());
    for (const SentOption& o : options) {
      const auto header = encode_option_header({o.option, static_cast<std::uint32_t>(o.data.size())});
      input.insert(input.end(), header.begin(), header.end());
      input.insert(input.end(), o.data.begin(), o.data.end());
    }
    // Sometimes the client goes away in the middle of an option.
    const bool cut_short = one_in(rng, 4);
    if (cut_short) {
      const auto header = encode_option_header({Option::go, 40});
      Bytes partial(header.begin(), header.end());
      partial.resize(option_header_size + 40);
      partial.resize(pick<std::size_t>(rng, 1, partial.size() - 1));
      input.insert(input.end(), partial.begin(), partial.end());
    }
    INFO("client sent: ", hex(input));
    CAPTURE(tls_required);

    ServerConfig config;
    config.exports.push_back(ServerExport{"disk", "a test disk", std::make_shared<SizeOnlyImage>()});
    config.tls_required = tls_required;
    auto memory = std::make_unique<MemoryStream>(input, pick<std::size_t>(rng, 1, 64));
    const MemoryStream& wire = *memory;
    std::unique_ptr<Stream> stream = std::move(memory);
    const std::optional<Outcome> outcome = run_bounded(context, stream, config);
    REQUIRE(outcome.has_value());  // the coroutine finished
    const Outcome& result = *outcome;
    if (!result) {
      ++failed;
      CHECK_FALSE(result.error().message.empty());
    } else if (*result) {
      ++chosen;
      REQUIRE((*result)->chosen != nullptr);
      CHECK((*result)->chosen->name == "disk");
    } else {
      ++closed;
    }

    const Bytes& sent = wire.sent;
    REQUIRE(sent.size() >= greeting_size);
    CHECK(decode_greeting(std::span(sent).first(greeting_size)).has_value());
    if (bad_flags) {
      CHECK_FALSE(result);
      CHECK(sent.size() == greeting_size);
      continue;
    }

    // Split what the server said into option replies and, last, an EXPORT_NAME reply.
    std::vector<Reply> replies;
    Bytes export_reply;
    for (std::size_t at = greeting_size; at < sent.size();) {
      if (sent.size() - at < option_reply_header_size || load_be(sent, at, 8) != option_reply_magic) {
        export_reply.assign(sent.begin() + static_cast<std::ptrdiff_t>(at), sent.end());
        break;
      }
      const std::uint64_t length = load_be(sent, at + 16, 4);
      REQUIRE(length <= max_option_length);
      REQUIRE(at + option_reply_header_size + length <= sent.size());
      const auto payload = sent.begin() + static_cast<std::ptrdiff_t>(at + option_reply_header_size);
      replies.push_back(Reply{static_cast<std::uint32_t>(load_be(sent, at + 8, 4)),
                              static_cast<std::uint32_t>(load_be(sent, at + 12, 4)),
                              Bytes(payload, payload + static_cast<std::ptrdiff_t>(length))});
      at += option_reply_header_size + length;
    }

    // Walk the options in the order sent, matching each to its answers.
    std::size_t next_reply = 0;
    std::optional<Option> ended_by;
    for (std::size_t i = 0; i < options.size() && !ended_by; ++i) {
      const SentOption& o = options[i];
      CAPTURE(i);
      if (o.option == Option::export_name) {
        // No option reply exists for it: the export's details, or a dropped connection.
        ended_by = o.option;
        if (result && *result) {
          CHECK_FALSE(tls_required);
          CHECK(export_reply.size() == ((client_flags & client_flag::no_zeroes) ? 10u : 134u));
          if (export_reply.size() >= 8) CHECK(load_be(export_reply, 0, 8) == image_size);
        } else {
          CHECK_FALSE(result);
          CHECK(export_reply.empty());
        }
        break;
      }
      std::optional<Reply> last;
      while (next_reply < replies.size() && !last) {
        const Reply& r = replies[next_reply++];
        CHECK(r.option == static_cast<std::uint32_t>(o.option));
        if (is_final(r)) last = r;
      }
      REQUIRE(last);  // every option the server read was answered to the end
      const bool error = (last->type & 0x80000000u) != 0;
      if (error) {
        ++error_replies;
        CHECK(last->payload.size() <= max_string_length);
      }
      if (malformed_data(o)) CHECK(error);
      if (o.option == Option::abort) ended_by = o.option;
      if (o.option == Option::go && !error) ended_by = o.option;
    }
    CHECK(next_reply == replies.size());  // nothing after the end
    if (ended_by != Option::export_name) CHECK(export_reply.empty());
    if (ended_by == Option::abort) CHECK((result && !*result));
    if (ended_by == Option::go) CHECK((result && *result));
    if (!ended_by) {
      // Every option was answered; then the client left, cleanly or mid-option.
      CHECK(result.has_value() == !cut_short);
      if (result) CHECK_FALSE(*result);
    }
  }
  CHECK(chosen > 40);
  CHECK(closed > 40);
  CHECK(failed > 40);
  CHECK(error_replies > 200);
}
