// Sluice's public C++ API: include this one header.
#pragma once

#include "apps/libsluice/endpoint_options.hpp"
#include "apps/libsluice/endpoints.hpp"
#include "apps/libsluice/receiver.hpp"
#include "apps/libsluice/transfer.hpp"
#include "engine/copier.hpp"
#include "engine/copy_options.hpp"
#include "engine/error.hpp"
#include "engine/size_parse.hpp"
#include "engine/stats.hpp"
