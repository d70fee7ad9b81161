// What a parent locator's data says about where the parent is, as a POSIX path.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/error.hpp"

namespace sluice::vhd {

constexpr std::uint32_t platform_macx = 0x4d616358;  // "MacX": a file:// URL, UTF-8
constexpr std::uint32_t platform_w2ku = 0x57326b75;  // "W2ku": absolute Windows path, UTF-16LE
constexpr std::uint32_t platform_w2ru = 0x57327275;  // "W2ru": relative Windows path, UTF-16LE

struct LocatedPath {
  std::string path;  // '/'-separated; relative to the child's directory unless absolute
  // A Windows path with a drive letter ("C:\vms\base.vhd"): only its file name means
  // anything here.
  bool foreign_absolute = false;
};

// nullopt for platform codes that name no file this reader resolves (the deprecated
// Wi2r/Wi2k, Mac aliases); an error when the data of a known kind is malformed.
Result<std::optional<LocatedPath>> decode_parent_locator(std::uint32_t platform_code,
                                                         std::span<const std::byte> data);

// "MacX", or "0x12345678" for codes that are not four printable letters.
std::string platform_name(std::uint32_t platform_code);

}  // namespace sluice::vhd
