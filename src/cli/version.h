// The client's version, for `cubeplane version` and the User-Agent header.
#pragma once

#include <string_view>

namespace cp::cli {
inline constexpr std::string_view kClientVersion = "0.1.0";
}  // namespace cp::cli
