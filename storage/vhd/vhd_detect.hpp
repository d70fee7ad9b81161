// Whether a local file is a VHD, asked before it is opened as a source.
#pragma once

#include <cstdint>

#include "engine/asio.hpp"
#include "engine/uring/file_ring.hpp"

namespace sluice::vhd {

// True when the file at `fd` (of `size` bytes) has a footer cookie in its last sector,
// or a footer and dynamic header cookie at its start (a dynamic VHD that lost its
// tail, which must be refused rather than copied as raw). Read through `ring`, so a
// raw file's reads stay on the io_uring path; a failed read answers false (the raw
// source then reports it).
awaitable<bool> looks_like_vhd(FileRing& ring, int fd, std::uint64_t size);

}  // namespace sluice::vhd
