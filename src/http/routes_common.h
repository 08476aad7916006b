// Shared pieces of the REST handlers (routes_*.cpp): authentication from the
// Authorization header, body decoding (JSON, or YAML for documents), query
// parameter checks, and the list/error shapes. Internal to src/http.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "http/http.h"
#include "http/metrics.h"
#include "http/router.h"
#include "server/control_plane.h"

namespace cp::http::detail {

// Handlers return a Result: an Error becomes the JSON error response (with
// WWW-Authenticate on 401).
using PrincipalHandler = std::function<Result<Response>(Request&, const Principal&)>;
using PlainHandler = std::function<Result<Response>(Request&)>;

// The token of "Authorization: Bearer X"; "" when absent or of another scheme.
std::string bearer_token(const Request& req);

Response to_response(Result<Response> r, const Request& req);

Handler public_route(PlainHandler fn);
// Authenticates a user token (ControlPlane::authenticate) before `fn`.
Handler user_route(ControlPlane& cp, PrincipalHandler fn);
// Authenticates an agent credential (ControlPlane::authenticate_agent).
Handler agent_route(ControlPlane& cp, PrincipalHandler fn);

// JSON body (refuses YAML media types with 415). An empty body is `{}` when
// allow_empty (optional bodies such as {"ttl_s"?}).
Result<json::value> json_body(const Request& req, bool allow_empty = false, json::storage_ptr storage = {});
// A document: YAML (application/yaml, text/yaml, application/x-yaml or no
// type) or JSON (application/json); JSON is YAML too.
Result<json::value> document_body(const Request& req);
// Decodes an agent message leniently (unknown fields ignored).
template <class T>
Result<T> decode_body(const Request& req) {
  // The parsed tree lives only while it is decoded: its memory comes from
  // one arena, released at once, not a malloc and a free per value (they
  // were a quarter of an agent sync's instructions).
  json::monotonic_resource arena(req.body.size() + 4096);
  CP_ASSIGN(auto v, json_body(req, false, &arena));
  T out{};
  CP_TRY(from_json(v, out, DecodeContext{"", false}));
  return out;
}

// Query parameters. Absent -> `fallback`; present and malformed or out of
// [min, max] -> 400 naming the parameter.
Result<std::int64_t> int_param(const Request& req, const std::string& name, std::int64_t fallback, std::int64_t min,
                               std::int64_t max);
Result<bool> bool_param(const Request& req, const std::string& name, bool fallback);
// limit: 1..1000.
Result<int> limit_param(const Request& req, int fallback = 100);
// Comma-separated task states; each must be a TaskState name.
Result<std::set<TaskState>> states_param(const Request& req);
// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& s);
// RFC 3339 or a date; absent -> fallback.
Result<Millis> time_param(const Request& req, const std::string& name, Millis fallback);

// {"items": [...], "next_cursor": cursor}
Response list_response(json::array items, const std::string& next_cursor = "");
template <class T>
Response list_of(const std::vector<T>& items, const std::string& next_cursor = "") {
  json::array arr;
  arr.reserve(items.size());
  for (const auto& i : items) arr.push_back(to_json(i));
  return list_response(std::move(arr), next_cursor);
}
inline Response ok_json(const json::value& v, int status = 200) { return json_response(status, v); }

// The route groups, one file each.
void add_system_routes(Router& router, ControlPlane& cp, Metrics* metrics);
void add_user_routes(Router& router, ControlPlane& cp);
void add_cluster_routes(Router& router, ControlPlane& cp);
void add_document_routes(Router& router, ControlPlane& cp);
void add_task_routes(Router& router, ControlPlane& cp);
void add_agent_routes(Router& router, ControlPlane& cp);
void add_monitoring_routes(Router& router, ControlPlane& cp);
void add_approval_routes(Router& router, ControlPlane& cp);
// Records every change by a user in the audit log (Router::set_audit).
void audit_changes(Router& router, ControlPlane& cp);
// The audit row of a request by `user`, without its outcome (status,
// before, after, error): who, what, from where, and the body (`document`,
// when the route has parsed it already), secrets redacted.
AuditEntry audit_entry(const Request& req, const std::string& user, const json::value* document = nullptr);

}  // namespace cp::http::detail
