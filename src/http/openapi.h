// The OpenAPI 3.0.3 document of the REST API, built from the router's table
// (every route with its method, path parameters, query parameters, body and
// responses), served at GET /api/v1/openapi.json.
#pragma once

#include <string>

#include "common/json.h"
#include "http/router.h"

namespace cp::http {

struct OpenApiInfo {
  std::string title = "Cubeplane API";
  std::string version = "0.1.0";
  std::string description =
      "Compute-governance control plane: clusters, resource groups, project groups, pipelines and tasks. "
      "Errors are {\"error\": {\"code\", \"message\", \"details\"}}; the message follows Accept-Language "
      "(en, zh-CN). Lists are {\"items\": [...], \"next_cursor\": \"...\"}.";
  std::string server_url = "/";
};

json::object build_openapi(const Router& router, const OpenApiInfo& info = {});

}  // namespace cp::http
