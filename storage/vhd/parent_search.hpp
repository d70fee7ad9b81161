// Finding a differencing disk's parent: the candidates its parent locators and parent
// name give, looked for in the child's directory and the search directories; the
// first whose unique id is the one the child names.
#pragma once

#include <string>
#include <vector>

#include "engine/error.hpp"

namespace sluice::vhd {

struct Member;

// The paths to try, in order, without duplicates.
Result<std::vector<std::string>> parent_candidates(const Member& child, const std::vector<std::string>& search_dirs);

// The parent's path. Errors: a candidate that exists with another unique id (the
// first such), or none exists (naming every path looked for).
Result<std::string> find_parent(const Member& child, const std::vector<std::string>& search_dirs);

}  // namespace sluice::vhd
