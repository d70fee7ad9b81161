// UTF-16 text in VHD metadata (the parent name is big-endian, Windows locators are
// little-endian) turned into UTF-8 for paths and messages.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace sluice::vhd {

enum class ByteOrder { big, little };

// Decodes up to the first NUL (or the end). A leading byte-order mark overrides
// `order`. Unpaired surrogates become U+FFFD.
std::string utf16_to_utf8(std::span<const std::byte> bytes, ByteOrder order);

}  // namespace sluice::vhd
