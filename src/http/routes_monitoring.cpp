// The fleet overview (heatmap data), alerts, the price table, and the audit log.
#include <boost/describe/enum_from_string.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "http/routes_common.h"

namespace cp::http::detail {

namespace {

Result<std::set<AlertState>> alert_states_param(const Request& req) {
  std::set<AlertState> out;
  for (const auto& name : split_list(req.query_param("state"))) {
    AlertState st{};
    if (!boost::describe::enum_from_string(name.c_str(), st)) {
      return errors::invalid("state", "unknown alert state \"" + name + "\" (pending, firing or resolved)",
                             "未知的告警状态 \"" + name + "\"（pending、firing 或 resolved）");
    }
    out.insert(st);
  }
  return out;
}

// An alert as the API shows it: `summary` in the language asked for.
json::value alert_json(const Alert& a, bool chinese) {
  json::value v = to_json(a);
  if (chinese && !a.summary_zh.empty()) v.as_object()["summary"] = a.summary_zh;
  return v;
}

json::value json_of(const Response& r) {
  if (r.stream || r.deferred || r.content_type.rfind("application/json", 0) != 0 || r.body.empty()) return nullptr;
  auto v = parse_json(r.body);
  if (!v.ok()) return nullptr;
  redact_secrets(*v);
  return *v;
}

// A dry run changes nothing, so there is nothing to audit. Only a route that
// documents dry_run does one, and it reads the flag with bool_param ("1",
// "yes" and a bare "?dry_run" count too); any other route ignores the
// parameter and changes what it changes, so "?dry_run=true" must not hide
// that change from the log.
bool is_dry_run(const Router& router, const Request& req) {
  for (const auto& r : router.routes()) {
    if (r.method != req.method || r.pattern != req.route) continue;
    const bool takes_dry_run = std::any_of(r.doc.query.begin(), r.doc.query.end(),
                                           [](const QueryParamDoc& q) { return q.name == "dry_run"; });
    if (!takes_dry_run) return false;
    auto dry_run = bool_param(req, "dry_run", false);
    return dry_run.ok() && *dry_run;
  }
  return false;
}

}  // namespace

AuditEntry audit_entry(const Request& req, const std::string& user, const json::value* document) {
  AuditEntry e;
  e.user = user;
  e.method = req.method;
  e.path = req.target;
  e.route = req.route;
  e.remote_addr = req.remote_addr;
  e.request_id = req.request_id;
  if (document != nullptr) {
    e.request = *document;
    redact_secrets(e.request);
  } else if (!req.body.empty()) {
    auto body = document_body(req);
    if (body.ok()) {
      e.request = std::move(*body);
      redact_secrets(e.request);
    } else {
      e.request = req.body.substr(0, 4096);
    }
  }
  return e;
}

void audit_changes(Router& router, ControlPlane& cp) {
  router.set_audit([&router, &cp](const Request& req, const std::optional<Response>& before, const Response& answer) {
    if (is_dry_run(router, req)) return;  // changes nothing
    auto p = cp.authenticate(bearer_token(req));
    if (!p.ok()) return;  // not a user: nothing was changed, nobody to name
    AuditEntry e = audit_entry(req, p->user);
    e.status = answer.status;
    if (before && before->status / 100 == 2) e.before = json_of(*before);
    if (answer.status / 100 == 2) {
      if (req.method != "DELETE") e.after = json_of(answer);
    } else if (auto err = json_of(answer); err.is_object() && err.as_object().contains("error")) {
      const auto& o = err.at("error");
      if (o.is_object() && o.as_object().contains("code") && o.as_object().contains("message")) {
        e.error = std::string(o.at("code").as_string()) + ": " + std::string(o.at("message").as_string());
      }
    }
    if (auto st = cp.record_audit(std::move(e)); !st.ok()) {
      spdlog::error("audit log: {} {} by {} not recorded: {}", req.method, req.target, p->user, st.error().to_string());
    }
  });
}

void add_monitoring_routes(Router& router, ControlPlane& cp) {
  router.add("GET", "/api/v1/overview",
             {.summary = "The fleet at a glance: per-cluster heatmap, totals, firing alerts",
              .tag = "overview",
              .response = "{\"now\",\"bucket_s\",\"buckets\":[time],\"clusters\":[{\"id\",\"name\",\"state\",\"reason\","
                          "\"gpus\":{\"total\",\"allocated\"},\"cells\":[{\"gpu_utilization\",\"allocation\","
                          "\"queue_wait_s\",\"failure_rate\"}]}],\"totals\":{...},\"alerts\":[Alert]}",
              .query = {{.name = "hours",
                         .description = "how far back, 1..8784 (default 24); columns are minutes up to 3 hours, "
                                        "hours up to 14 days, days beyond",
                         .type = "integer"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto hours, int_param(req, "hours", 24, 1, 24 * 366));
               CP_ASSIGN(auto out, cp.overview(p, hours));
               if (prefers_chinese(req.accept_language())) {
                 for (auto& a : out["alerts"].as_array()) {
                   auto& o = a.as_object();
                   if (!o["summary_zh"].as_string().empty()) o["summary"] = o["summary_zh"];
                 }
               }
               return ok_json(out);
             }));

  router.add("GET", "/api/v1/alerts",
             {.summary = "Alerts, newest first",
              .tag = "alerts",
              .response = "list of Alert",
              .query = {{.name = "state", .description = "pending, firing or resolved; several separated by commas"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"},
                        {.name = "cursor", .description = "next_cursor of the previous page"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               AlertQuery q;
               CP_ASSIGN(q.states, alert_states_param(req));
               CP_ASSIGN(q.limit, limit_param(req));
               q.cursor = req.query_param("cursor");
               CP_ASSIGN(auto page, cp.list_alerts(p, std::move(q)));
               const bool chinese = prefers_chinese(req.accept_language());
               json::array items;
               for (const auto& a : page.items) items.push_back(alert_json(a, chinese));
               return list_response(std::move(items), page.next_cursor);
             }));

  router.add("GET", "/api/v1/price-table",
             {.summary = "The price table: what an hour of each resource costs, from a date on",
              .tag = "usage",
              .response = "PriceTable document"},
             user_route(cp, [&cp](Request&, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto out, cp.get_price_table(p));
               return ok_json(out);
             }));

  router.add("PUT", "/api/v1/price-table",
             {.summary = "Replace the price table (admin)",
              .tag = "usage",
              .body = BodyKind::document,
              .body_description = "a PriceTable document in YAML (application/yaml) or JSON",
              .response = "PriceTable document"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto doc, document_body(req));
               CP_ASSIGN(auto out, cp.apply_price_table(p, doc));
               return ok_json(out);
             }));

  router.add("GET", "/api/v1/audit",
             {.summary = "The audit log: every change made through the API, newest first (admin)",
              .tag = "audit",
              .auth = AuthKind::admin,
              .response = "list of AuditEntry",
              .query = {{.name = "user", .description = "only changes by this user"},
                        {.name = "from", .description = "date or RFC 3339 time"},
                        {.name = "to", .description = "date or RFC 3339 time (exclusive)"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"},
                        {.name = "cursor", .description = "next_cursor of the previous page"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               AuditQuery q;
               q.user = req.query_param("user");
               CP_ASSIGN(q.from, time_param(req, "from", 0));
               CP_ASSIGN(q.to, time_param(req, "to", 0));
               CP_ASSIGN(q.limit, limit_param(req));
               q.cursor = req.query_param("cursor");
               CP_ASSIGN(auto page, cp.list_audit(p, std::move(q)));
               return list_of(page.items, page.next_cursor);
             }));
}

}  // namespace cp::http::detail
