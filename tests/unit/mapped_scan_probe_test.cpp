#include "engine/mapped_scan_probe.hpp"

#include <doctest/doctest.h>

using namespace sluice;

namespace {

void feed(MappedScanProbe& probe, std::initializer_list<ScanCost> costs) {
  for (const ScanCost& c : costs) probe.add(c);
}

}  // namespace

TEST_CASE("the probe keeps measuring until it has enough scans, and gives no verdict before") {
  MappedScanProbe probe;
  for (std::size_t i = 0; i + 1 < MappedScanProbe::samples_needed; ++i) {
    CHECK(probe.measuring());
    probe.add({5000, 100});
    CHECK_FALSE(probe.mapping_is_dear());
  }
  CHECK(probe.measuring());
  probe.add({5000, 100});
  CHECK_FALSE(probe.measuring());
  CHECK(probe.mapping_is_dear());
  CHECK(probe.median().touch_ns_per_page == 5000);
  CHECK(probe.median().copy_ns_per_page == 100);
}

TEST_CASE("the verdict is taken on medians: one preempted scan does not decide it") {
  MappedScanProbe cheap;
  // Seven scans where touching is far cheaper than copying, one that was preempted.
  feed(cheap, {{50, 600}, {40, 650}, {60, 620}, {1e7, 600}, {55, 610}, {45, 640}, {50, 630}, {52, 615}});
  CHECK_FALSE(cheap.measuring());
  CHECK_FALSE(cheap.mapping_is_dear());
  CHECK(cheap.median().touch_ns_per_page < 100);

  MappedScanProbe dear;
  feed(dear, {{2100, 600}, {2300, 650}, {2500, 1e7}, {2200, 620}, {2600, 610}, {2400, 640}, {5, 630}, {2250, 615}});
  CHECK(dear.mapping_is_dear());
  CHECK(dear.median().touch_ns_per_page > 2000);
  CHECK(dear.median().copy_ns_per_page < 1000);
}

TEST_CASE("the ratio sets how much dearer touching must be") {
  const auto verdict = [](double ratio, double touch, double copy) {
    MappedScanProbe probe(ratio);
    for (std::size_t i = 0; i < MappedScanProbe::samples_needed; ++i) probe.add({touch, copy});
    return probe.mapping_is_dear();
  };
  CHECK(verdict(1.0, 700, 600));
  CHECK_FALSE(verdict(1.0, 500, 600));
  CHECK_FALSE(verdict(2.0, 1100, 600));
  CHECK(verdict(2.0, 1300, 600));
  CHECK(verdict(0, 0, 600));  // 0: dear whatever it costs
}

TEST_CASE("scans that finish after the verdict do not change it") {
  MappedScanProbe probe;
  for (std::size_t i = 0; i < MappedScanProbe::samples_needed; ++i) probe.add({100, 600});
  REQUIRE_FALSE(probe.mapping_is_dear());
  for (int i = 0; i < 20; ++i) probe.add({1e6, 1});
  CHECK_FALSE(probe.mapping_is_dear());
  CHECK(probe.median().touch_ns_per_page == 100);
}

TEST_CASE("the scratch holds the longest range asked for while measuring") {
  MappedScanProbe probe;
  CHECK(probe.scratch(4096).size() >= 4096);
  CHECK(probe.scratch(1 << 20).size() >= (1u << 20));
  CHECK(probe.scratch(8192).size() >= 8192);
}
