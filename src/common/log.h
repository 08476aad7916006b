// Logging goes through spdlog; this header only fixes the setup in one place.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace cp {
// level: trace|debug|info|warn|error. Logs go to stderr.
void setup_logging(const std::string& level);
}  // namespace cp
