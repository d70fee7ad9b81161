// Pipe: the kernel buffer that splice() moves pages through. Data goes
// file -> pipe -> socket (or socket -> pipe -> file) without ever being copied into
// this process; the pipe holds references to the pages, not copies.
#pragma once

#include <cstddef>
#include <span>

#include "engine/error.hpp"
#include "engine/unique_fd.hpp"

namespace sluice {

class Pipe {
 public:
  // A pipe as large as the system allows (pipe-max-size, usually 1 MiB): fewer splice
  // round trips per request.
  static Result<Pipe> create();

  int read_end() const { return read_.get(); }
  int write_end() const { return write_.get(); }
  // Bytes one splice from a file can always put in the empty pipe, whatever the file
  // offset's alignment (the pipe's size less one page).
  std::size_t capacity() const { return capacity_; }
  // What a splice from a file can still put in after put() of at most lead_limit()
  // bytes into the empty pipe (those take one page of it).
  std::size_t capacity_after_lead() const;
  static std::size_t lead_limit();
  // The capacity() create() aims for on this system (a pipe may still come out smaller
  // where the user's pipe limits are reached).
  static std::size_t planned_capacity();

  // Copies `bytes` in, which must fit: the pipe then never blocks.
  Status put(std::span<const std::byte> bytes) const;
  // Copies out exactly `into.size()` bytes known to be waiting in the pipe.
  Status take(std::span<std::byte> into) const;

 private:
  UniqueFd read_;
  UniqueFd write_;
  std::size_t capacity_ = 0;
};

}  // namespace sluice
