// Approvals: ask to use a resource group that needs one; approve, deny, revoke.
#include <boost/describe/enum_from_string.hpp>

#include "http/routes_common.h"

namespace cp::http::detail {

namespace {

// An approval as the API shows it: with `active`, whether it holds now.
json::value approval_json(const Approval& a, Millis now) {
  json::value v = to_json(a);
  v.as_object()["active"] = a.holds_at(now);
  return v;
}

Result<std::set<ApprovalState>> approval_states_param(const Request& req) {
  std::set<ApprovalState> out;
  for (const auto& name : split_list(req.query_param("state"))) {
    ApprovalState st{};
    if (!boost::describe::enum_from_string(name.c_str(), st)) {
      return errors::invalid("state", "unknown approval state \"" + name + "\" (pending, approved, denied or revoked)",
                             "未知的审批状态 \"" + name + "\"（pending、approved、denied 或 revoked）");
    }
    out.insert(st);
  }
  return out;
}

}  // namespace

void add_approval_routes(Router& router, ControlPlane& cp) {
  router.add("POST", "/api/v1/approvals",
             {.summary = "Ask to use a resource group that the project group lists with approval: required",
              .tag = "approvals",
              .body = BodyKind::json,
              .body_description = "{\"project_group\", \"resource_group\", \"reason\"?}",
              .response = "Approval (pending)",
              .success_status = 201},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               CP_ASSIGN(auto a, cp.request_approval(p, body));
               return ok_json(approval_json(a, cp.clock().now_ms()), 201);
             }));

  router.add("GET", "/api/v1/approvals",
             {.summary = "Approvals, newest first (those of your project groups)",
              .tag = "approvals",
              .response = "list of Approval (+ active)",
              .query = {{.name = "state", .description = "pending, approved, denied or revoked; several with commas"},
                        {.name = "project_group"},
                        {.name = "resource_group"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"},
                        {.name = "cursor", .description = "next_cursor of the previous page"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               ApprovalQuery q;
               CP_ASSIGN(q.states, approval_states_param(req));
               q.project_group = req.query_param("project_group");
               q.resource_group = req.query_param("resource_group");
               CP_ASSIGN(q.limit, limit_param(req));
               q.cursor = req.query_param("cursor");
               CP_ASSIGN(auto page, cp.list_approvals(p, std::move(q)));
               const Millis now = cp.clock().now_ms();
               json::array items;
               for (const auto& a : page.items) items.push_back(approval_json(a, now));
               return list_response(std::move(items), page.next_cursor);
             }));

  for (const std::string verb : {"approve", "deny", "revoke"}) {
    router.add("POST", "/api/v1/approvals/{id}/" + verb,
               {.summary = verb == "approve"  ? "Approve a pending request (project-group admin or platform admin)"
                           : verb == "deny" ? "Deny a pending request"
                                            : "Revoke an approval",
                .tag = "approvals",
                .body = BodyKind::json,
                .body_description = verb == "approve" ? "{\"ttl_s\"?: seconds it holds, \"note\"?}" : "{\"note\"?}",
                .body_required = false,
                .response = "Approval"},
               user_route(cp, [&cp, verb](Request& req, const Principal& p) -> Result<Response> {
                 CP_ASSIGN(auto body, json_body(req, /*allow_empty=*/true));
                 CP_ASSIGN(auto a, cp.decide_approval(p, req.param("id"), verb, body));
                 return ok_json(approval_json(a, cp.clock().now_ms()));
               }));
  }
}

}  // namespace cp::http::detail
