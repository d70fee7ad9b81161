// WorkItem: what flows between a copy lane's stages, one request's worth of the image.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/asio.hpp"
#include "engine/buffer.hpp"
#include "engine/extent.hpp"
#include "engine/file_slice.hpp"

namespace sluice {

struct WorkItem {
  std::uint64_t seq = 0;  // position in offset order; the ordered writer sorts by it
  Extent extent;
  Buffer data;  // the payload, once a data item has been read
  bool end = false;
  std::optional<FileSlice> file;  // instead of `data`, when zero-copy: where the payload lies
};

using ItemChannel = asio::experimental::channel<void(asio::error_code, WorkItem)>;

}  // namespace sluice
