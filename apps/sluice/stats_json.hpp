#pragma once

#include <string>

#include "engine/stats.hpp"

namespace sluice::cli {

// The --stats summary: one JSON object.
std::string stats_json(const TransferStats& stats);

}  // namespace sluice::cli
