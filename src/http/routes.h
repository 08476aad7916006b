// The REST API of docs/rest-shapes.md on a Router: every route, its
// OpenAPI description, and the static web UI as the fallback.
//
//   Router router;
//   Metrics metrics;
//   add_api_routes(router, control_plane, &metrics, "/usr/share/cubeplane/web");
//   HttpServer server(router, HttpLimits{}, &metrics);
//
// Handlers authenticate (Authorization: Bearer), decode and check the
// request, call ControlPlane (which authorizes), and encode with cp::to_json.
#pragma once

#include <string>

#include "http/metrics.h"
#include "http/router.h"

namespace cp {
class ControlPlane;
}

namespace cp::http {

// `metrics` may be null (then GET /metrics answers 404). `web_root`: a
// directory with the built UI (index.html); "" or one without index.html
// serves a built-in page that says the UI is not built.
void add_api_routes(Router& router, ControlPlane& cp, Metrics* metrics, const std::string& web_root);

}  // namespace cp::http
