#include "storage/vhd/parent_search.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "engine/unique_fd.hpp"
#include "storage/vhd/parent_locator.hpp"
#include "storage/vhd/vhd_chain.hpp"

namespace sluice::vhd {

namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string joined(const std::string& dir, const std::string& relative) {
  std::string rest = relative;
  while (rest.starts_with("./")) rest = rest.substr(2);
  return dir.ends_with('/') ? dir + rest : dir + "/" + rest;
}

// Relative locators first (W2ru, then MacX as blktap writes it), absolute ones after:
// a chain that was moved keeps its relative names right.
int locator_rank(std::uint32_t code) {
  if (code == platform_w2ru) return 0;
  if (code == platform_macx) return 1;
  return 2;
}

// The trailing footer's unique id, or why the file is no VHD.
Result<Uid> unique_id_of(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(errno_code(errno), path + ": " + errno_code(errno).message());
  std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    off_t end = ::lseek(fd.get(), 0, SEEK_END);
    size = end < 0 ? 0 : static_cast<std::uint64_t>(end);
  }
  std::byte bytes[footer_size];
  if (size < footer_size ||
      ::pread(fd.get(), bytes, footer_size, static_cast<off_t>(size - footer_size)) != static_cast<ssize_t>(footer_size))
    return fail(std::errc::invalid_argument, path + ": too short for a VHD");
  auto footer = parse_footer(bytes);
  if (!footer)
    return fail(std::errc::invalid_argument, path + ": VHD footer at offset " + std::to_string(size - footer_size) +
                                                 ": " + footer.error().message);
  return footer->uid;
}

}  // namespace

Result<std::vector<std::string>> parent_candidates(const Member& child, const std::vector<std::string>& search_dirs) {
  const Header& h = *child.header;
  const std::string dir = directory_of(child.path);
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  auto add_relative = [&](const std::string& rel) {
    add(joined(dir, rel));
    for (const std::string& d : search_dirs) add(joined(d, rel));
  };
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < h.locators.size(); ++i)
    if (h.locators[i].platform_code != 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return locator_rank(h.locators[a].platform_code) < locator_rank(h.locators[b].platform_code);
  });
  for (std::size_t i : order) {
    const ParentLocatorEntry& l = h.locators[i];
    const std::string where = "parent locator " + std::to_string(i) + " (" + platform_name(l.platform_code) +
                              ") at offset " + std::to_string(l.data_offset);
    if (l.data_length == 0) continue;
    if (l.data_length > 65536 || l.data_offset > child.file_size - footer_size ||
        child.file_size - footer_size - l.data_offset < l.data_length)
      return fail(std::errc::invalid_argument, child.path + ": " + where + ": its " +
                                                   std::to_string(l.data_length) +
                                                   " bytes do not fit before the footer");
    std::vector<std::byte> data(l.data_length);
    if (::pread(child.fd.get(), data.data(), data.size(), static_cast<off_t>(l.data_offset)) !=
        static_cast<ssize_t>(data.size()))
      return fail(std::errc::io_error, child.path + ": " + where + ": cannot be read");
    auto located = decode_parent_locator(l.platform_code, data);
    if (!located) return fail(std::errc::invalid_argument, child.path + ": " + where + ": " + located.error().message);
    if (!*located) continue;
    const LocatedPath& p = **located;
    if (p.foreign_absolute) {
      add_relative(base_name(p.path));
    } else if (p.path.starts_with('/')) {
      add(p.path);
      for (const std::string& d : search_dirs) add(joined(d, base_name(p.path)));
    } else {
      add_relative(p.path);
    }
  }
  if (!h.parent_name.empty()) {
    std::string name = h.parent_name;
    std::replace(name.begin(), name.end(), '\\', '/');
    add_relative(base_name(name));
  }
  return out;
}

Result<std::string> find_parent(const Member& child, const std::vector<std::string>& search_dirs) {
  auto candidates = parent_candidates(child, search_dirs);
  if (!candidates) return tl::unexpected(candidates.error());
  const Header& h = *child.header;
  const std::string wanted = to_string(h.parent_uid);
  std::string first_mismatch;
  for (const std::string& path : *candidates) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    auto uid = unique_id_of(path);
    if (uid && *uid == h.parent_uid) return path;
    if (first_mismatch.empty())
      first_mismatch = uid ? path + " has unique id " + to_string(*uid) : uid.error().message;
  }
  const std::string header_at = "dynamic header at offset " + std::to_string(child.footer.data_offset);
  if (!first_mismatch.empty())
    return fail(std::errc::invalid_argument, child.path + ": " + header_at + ": the parent must have unique id " +
                                                 wanted + ", but " + first_mismatch);
  std::string looked;
  for (const std::string& path : *candidates) looked += (looked.empty() ? "" : ", ") + path;
  return fail(std::errc::no_such_file_or_directory,
              child.path + ": " + header_at + ": the parent" + (h.parent_name.empty() ? "" : " '" + h.parent_name + "'") +
                  " (unique id " + wanted +
                  ") is missing; looked for " + (looked.empty() ? "nothing: no locator names a file" : looked));
}

}  // namespace sluice::vhd
