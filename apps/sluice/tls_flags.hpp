// The --tls-* options, declared once for both ends: `sluice copy` and `info` connect
// (and may verify the server), `sluice serve` accepts (and may verify clients).
#pragma once

#include <vector>

#include "apps/sluice/option_table.hpp"
#include "engine/net/tls_options.hpp"

namespace sluice::cli {

enum class TlsSide { client, server };

// Options that fill `tls`, which must outlive the parse.
std::vector<OptionSpec> tls_flags(TlsOptions& tls, TlsSide side);

}  // namespace sluice::cli
