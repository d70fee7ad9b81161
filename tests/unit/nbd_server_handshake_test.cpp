// The NBD server's handshake as a client sees it, through an in-memory stream: the
// words of its error replies, and how a full server refuses a client (an error to GO
// naming the limit, then more haggling; or, before the handshake, every option
// answered with that error).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>  // doctest prints std::error_code through it
#include <string>
#include <vector>

#include "protocols/nbd/handshake_messages.hpp"
#include "protocols/nbd/server/handshake.hpp"
#include "protocols/nbd/server/refusal.hpp"
#include "tests/unit/fuzz_bytes.hpp"
#include "tests/unit/memory_stream.hpp"
#include "tests/unit/run_loop.hpp"

using namespace sluice;
using namespace sluice::nbd;
using namespace sluice::test;

namespace {

// The handshake asks an image only for its size and traits.
class SizeOnlyImage final : public Image {
 public:
  std::uint64_t size() const override { return 1u << 20; }
  ImageTraits traits() const override { return {}; }
  std::string describe() const override { return "size only"; }
  awaitable<Status> read(std::uint64_t, std::span<std::byte>) override { co_return unused(); }
  awaitable<Status> write(std::uint64_t, std::span<const std::byte>, bool) override { co_return unused(); }
  awaitable<Status> zero(std::uint64_t, std::uint64_t, ZeroRequest) override { co_return unused(); }
  awaitable<Status> trim(std::uint64_t, std::uint64_t, bool) override { co_return unused(); }
  awaitable<Status> flush() override { co_return unused(); }
  awaitable<Status> cache(std::uint64_t, std::uint64_t) override { co_return unused(); }
  awaitable<Result<std::vector<Extent>>> extents(std::uint64_t, std::uint64_t) override { co_return unused(); }

 private:
  static tl::unexpected<Error> unused() { return fail(std::errc::not_supported, "not in a handshake"); }
};

ServerConfig one_export() {
  ServerConfig config;
  config.exports.push_back(ServerExport{"disk", "", std::make_shared<SizeOnlyImage>()});
  return config;
}

// What a client sends: its flags, then these options.
Bytes client_input(const std::vector<std::pair<Option, Bytes>>& options) {
  Bytes input;
  const auto flags = encode_client_flags(client_flag::fixed_newstyle | client_flag::no_zeroes);
  input.insert(input.end(), flags.begin(), flags.end());
  for (const auto& [option, data] : options) {
    const auto header = encode_option_header({option, static_cast<std::uint32_t>(data.size())});
    input.insert(input.end(), header.begin(), header.end());
    input.insert(input.end(), data.begin(), data.end());
  }
  return input;
}

Bytes go_data(std::string_view name) {
  auto message = encode_info_option(Option::go, name, {});
  REQUIRE(message);
  return Bytes(message->begin() + option_header_size, message->end());
}

struct Reply {
  std::uint32_t option = 0;
  OptionReplyType type = OptionReplyType::ack;
  std::string text;
};

// The option replies after the 18-byte greeting.
std::vector<Reply> replies(const Bytes& sent) {
  std::vector<Reply> out;
  std::size_t at = 18;
  auto u32 = [&](std::size_t i) {
    return (std::to_integer<std::uint32_t>(sent[i]) << 24) | (std::to_integer<std::uint32_t>(sent[i + 1]) << 16) |
           (std::to_integer<std::uint32_t>(sent[i + 2]) << 8) | std::to_integer<std::uint32_t>(sent[i + 3]);
  };
  while (at + 20 <= sent.size()) {
    Reply r;
    r.option = u32(at + 8);
    r.type = static_cast<OptionReplyType>(u32(at + 12));
    const std::uint32_t length = u32(at + 16);
    REQUIRE(at + 20 + length <= sent.size());
    r.text = as_text(Bytes(sent.begin() + static_cast<std::ptrdiff_t>(at + 20),
                           sent.begin() + static_cast<std::ptrdiff_t>(at + 20 + length)));
    out.push_back(r);
    at += 20 + length;
  }
  CHECK(at == sent.size());
  return out;
}

using Outcome = Result<std::optional<Negotiated>>;

awaitable<Outcome> negotiate_on(std::unique_ptr<Stream>& stream, const ServerConfig* config, ServingGate* gate) {
  co_return co_await negotiate(stream, *config, *gate);
}

// A gate whose first `refusals` claims find the server full.
awaitable<Status> claim(int* refusals) {
  if (*refusals == 0) co_return Status{};
  --*refusals;
  co_return fail(std::errc::device_or_resource_busy,
                 "the server is busy: it already serves 2 clients (--max-connections); try again later");
}

}  // namespace

TEST_CASE("NBD server: an option it does not know is named once in the error") {
  auto memory = std::make_unique<MemoryStream>(client_input({{static_cast<Option>(4660), {}}, {Option::abort, {}}}));
  const MemoryStream& wire = *memory;
  std::unique_ptr<Stream> stream = std::move(memory);
  const ServerConfig config = one_export();
  ServingGate gate;
  Outcome outcome = run(negotiate_on(stream, &config, &gate));
  REQUIRE(outcome);
  CHECK_FALSE(*outcome);  // ended by ABORT
  auto got = replies(wire.sent);
  REQUIRE(got.size() == 2);
  CHECK(got[0].option == 4660);
  CHECK(got[0].type == OptionReplyType::err_unsup);
  CHECK(got[0].text == "option 4660 is not supported");
  CHECK(got[1].type == OptionReplyType::ack);
}

TEST_CASE("NBD server: a full server answers GO with ERR_POLICY naming the limit; a later GO gets in") {
  auto memory = std::make_unique<MemoryStream>(client_input({{Option::go, go_data("disk")}, {Option::go, go_data("disk")}}));
  const MemoryStream& wire = *memory;
  std::unique_ptr<Stream> stream = std::move(memory);
  const ServerConfig config = one_export();
  int refusals = 1;
  ServingGate gate([&refusals] { return claim(&refusals); });
  Outcome outcome = run(negotiate_on(stream, &config, &gate));
  REQUIRE(outcome);
  REQUIRE(*outcome);
  CHECK((*outcome)->chosen->name == "disk");
  CHECK(gate.entered());
  auto got = replies(wire.sent);
  REQUIRE(got.size() >= 2);
  CHECK(got[0].option == static_cast<std::uint32_t>(Option::go));
  CHECK(got[0].type == OptionReplyType::err_policy);
  CHECK(got[0].text == "the server is busy: it already serves 2 clients (--max-connections); try again later");
  CHECK(got.back().type == OptionReplyType::ack);
}

TEST_CASE("NBD server: a full server hangs up on EXPORT_NAME, which cannot be answered with an error") {
  auto memory = std::make_unique<MemoryStream>(client_input({{Option::export_name, as_bytes("disk")}}));
  const MemoryStream& wire = *memory;
  std::unique_ptr<Stream> stream = std::move(memory);
  const ServerConfig config = one_export();
  int refusals = 1;
  ServingGate gate([&refusals] { return claim(&refusals); });
  Outcome outcome = run(negotiate_on(stream, &config, &gate));
  REQUIRE(outcome);  // not an error: the refusal is the server's, and reported by it
  CHECK_FALSE(*outcome);
  CHECK_FALSE(gate.entered());
  CHECK(wire.sent.size() == 18);  // the greeting, nothing after
}

TEST_CASE("NBD refusal: every option gets ERR_POLICY with the reason until GO's, then ABORT is acknowledged") {
  // libnbd shrugs off an error to STRUCTURED_REPLY and INFO and goes on to GO: only
  // an answer to every option reaches the GO whose error it reports.
  auto memory = std::make_unique<MemoryStream>(client_input({{Option::structured_reply, {}},
                                                             {Option::info, go_data("disk")},
                                                             {Option::go, go_data("disk")},
                                                             {Option::abort, {}}}));
  const MemoryStream& wire = *memory;
  const std::string reason =
      "the server is busy: 64 clients are already in their handshake (--max-handshakes); try again later";
  run(refuse_client(*memory, reason));
  auto got = replies(wire.sent);
  REQUIRE(got.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(got[i].type == OptionReplyType::err_policy);
    CHECK(got[i].text == reason);
  }
  CHECK(got[2].option == static_cast<std::uint32_t>(Option::go));
  CHECK(got[3].type == OptionReplyType::ack);
}

TEST_CASE("NBD refusal: EXPORT_NAME gets no reply (it cannot be refused in words)") {
  auto memory = std::make_unique<MemoryStream>(client_input({{Option::export_name, as_bytes("disk")}}));
  const MemoryStream& wire = *memory;
  run(refuse_client(*memory, "busy"));
  CHECK(wire.sent.size() == 18);
}
