// The web UI: files under a directory, index.html for client-side routes,
// never a file outside the directory. Internal to src/http.
#pragma once

#include <string>

#include "http/router.h"

namespace cp::http {

// A router fallback serving GET/HEAD of any path not under /api/ from
// `web_root`: the file when it exists, index.html for paths without a file
// extension (client routing), 404 otherwise. Without web_root/index.html a
// built-in page says the UI is not built and links /api/v1/openapi.json.
Fallback static_files(const std::string& web_root);

// Content-Type by file extension ("application/octet-stream" when unknown).
std::string content_type_for(const std::string& path);

}  // namespace cp::http
