#include "http/routes.h"

#include "http/openapi.h"
#include "http/routes_common.h"
#include "http/static_files.h"

namespace cp::http {

void add_api_routes(Router& router, ControlPlane& cp, Metrics* metrics, const std::string& web_root) {
  detail::add_system_routes(router, cp, metrics);
  detail::add_user_routes(router, cp);
  detail::add_cluster_routes(router, cp);
  detail::add_document_routes(router, cp);
  detail::add_task_routes(router, cp);
  detail::add_agent_routes(router, cp);
  detail::add_monitoring_routes(router, cp);
  detail::add_approval_routes(router, cp);

  // Built per request from the live table, so it always matches what is served.
  router.add("GET", "/api/v1/openapi.json",
             {.summary = "This OpenAPI document",
              .tag = "system",
              .auth = AuthKind::none,
              .response = "OpenAPI 3.0.3 document"},
             [&router](Request&) { return json_response(200, build_openapi(router)); });

  router.set_fallback(static_files(web_root));
  detail::audit_changes(router, cp);
}

}  // namespace cp::http
