// Base64 (RFC 4648 section 4, with padding) for HTTP Basic authorization.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

std::string base64_encode(std::string_view bytes);

}  // namespace sluice
