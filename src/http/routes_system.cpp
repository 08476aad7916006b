// /healthz, /readyz, /metrics.
#include "common/log.h"
#include "http/routes_common.h"

namespace cp::http::detail {

void add_system_routes(Router& router, ControlPlane& cp, Metrics* metrics) {
  router.add("GET", "/healthz",
             {.summary = "Liveness: the process answers",
              .tag = "system",
              .auth = AuthKind::none,
              .response = "{\"status\":\"ok\"}"},
             [](Request&) { return json_response(200, json::object{{"status", "ok"}}); });

  router.add("GET", "/readyz",
             {.summary = "Readiness: the metadata store answers",
              .tag = "system",
              .auth = AuthKind::none,
              .response = "{\"status\":\"ok\"}; 503 when the store is unreachable"},
             [&cp](Request& req) {
               if (cp.store_healthy()) return json_response(200, json::object{{"status", "ok"}});
               return error_response(errors::unavailable("the metadata store is unreachable", "元数据存储不可用"),
                                     req);
             });

  if (metrics != nullptr) {
    router.add("GET", "/metrics",
               {.summary = "Prometheus metrics (text format 0.0.4)",
                .tag = "system",
                .auth = AuthKind::none,
                .response = "Prometheus text exposition",
                .response_content_types = {"text/plain"}},
               [&cp, metrics](Request& req) {
                 // Domain gauges are refreshed on scrape; if the store is
                 // down the HTTP metrics are still worth serving.
                 auto snap = cp.metrics();
                 if (snap.ok()) {
                   metrics->update_domain(*snap);
                 } else {
                   spdlog::warn("metrics: cannot read domain figures: {} [{}]", snap.error().to_string(),
                                req.request_id);
                 }
                 return text_response(200, metrics->serialize(), Metrics::kContentType);
               });
  }
}

}  // namespace cp::http::detail
