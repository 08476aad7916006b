#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace cp {
void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("cubeplane");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
}
}  // namespace cp
