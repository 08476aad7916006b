// /healthz, /readyz, /metrics, /api/v1/control-plane.
#include "common/log.h"
#include "http/routes_common.h"

namespace cp::http::detail {
namespace {

json::value time_or_null(Millis t) { return t == 0 ? json::value(nullptr) : json::value(format_time(t)); }

// What this server knows: itself, and the leader the store names (a
// follower learns it from the leader row, beacon.h).
json::object control_plane_status(ControlPlane& cp) {
  json::object out;
  out["lease_ttl_s"] = cp.config().lease_ttl_s;
  const auto* b = cp.beacon();
  if (b == nullptr) {
    out["servers"] = json::array{};
    out["leader"] = nullptr;
    out["term"] = 0;
    out["judging"] = true;  // without a beacon, silence counts from the start
    out["lost_after_ms"] = cp.config().lost_after_s * 1000;
    return out;
  }
  const auto s = b->status();
  const auto& t = b->timing();
  json::object me{{"id", s.server_id},
                   {"leader", s.leading},
                   {"term", s.term},
                   {"leading_since", time_or_null(s.leading_since)},
                   {"judging", s.judging_since != 0},
                   {"judging_since", time_or_null(s.judging_since)},
                   {"not_judging", s.not_judging},
                   {"beacon_seq", s.seq},
                   {"witness", s.witness}};
  out["servers"] = json::array{me};
  out["leader"] = s.leader.empty() ? json::value(nullptr) : json::value(s.leader);
  out["term"] = s.leader_term;
  out["judging"] = s.judging_since != 0;
  out["lost_after_ms"] = t.lost_after;
  out["beacon_period_ms"] = t.period;
  out["beacon_deadline_ms"] = t.deadline;
  return out;
}

}  // namespace


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

  router.add("GET", "/api/v1/control-plane",
             {.summary = "The control plane: this server, its term, and whether it judges liveness",
              .tag = "system",
              .auth = AuthKind::user,
              .response = "{servers: [{id, leader, term, leading_since, judging, judging_since, not_judging, "
                          "beacon_seq, witness}], leader, term, judging, lease_ttl_s, lost_after_ms, "
                          "beacon_period_ms, beacon_deadline_ms}"},
             user_route(cp, [&cp](Request&, const Principal&) -> Result<Response> {
               return json_response(200, control_plane_status(cp));
             }));

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
                 if (const auto* b = cp.beacon()) {
                   const auto s = b->status();
                   metrics->update_control_plane(s.server_id, s.term, s.seq, s.judging_since != 0);
                 }
                 return text_response(200, metrics->serialize(), Metrics::kContentType);
               });
  }
}

}  // namespace cp::http::detail
