#include "storage/vhd/vhd_detect.hpp"

#include <cstring>
#include <vector>

#include "storage/vhd/vhd_footer.hpp"
#include "storage/vhd/vhd_header.hpp"

namespace sluice::vhd {

awaitable<bool> looks_like_vhd(FileRing& ring, int fd, std::uint64_t size) {
  std::vector<std::byte> bytes(footer_size + header_size);
  if (size >= footer_size) {
    std::span<std::byte> tail(bytes.data(), footer_size);
    Status read = co_await ring_read_exactly(ring, fd, size - footer_size, tail, false);
    if (read && has_footer_cookie(tail)) co_return true;
  }
  if (size < bytes.size()) co_return false;
  Status read = co_await ring_read_exactly(ring, fd, 0, bytes, false);
  co_return read && has_footer_cookie(bytes) && std::memcmp(bytes.data() + footer_size, "cxsparse", 8) == 0;
}

}  // namespace sluice::vhd
