// Pipelines, tasks (list, get, cancel, explain, logs), events and usage.
#include <fmt/format.h>

#include <boost/describe/enum_from_string.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

#include "common/ids.h"
#include "common/log.h"
#include "http/routes_common.h"

namespace cp::http::detail {
namespace {

constexpr std::int64_t kDayMs = 86'400'000;

// "t-01abc.3" -> 3; 0 when the id has no numeric suffix.
int attempt_number_of(const std::string& attempt_id) {
  auto dot = attempt_id.rfind('.');
  if (dot == std::string::npos) return 0;
  int n = 0;
  auto s = std::string_view(attempt_id).substr(dot + 1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc() && ptr == s.data() + s.size() ? n : 0;
}

void add_log_headers(Response& r, const LogRead& read) {
  if (!read.attempt_id.empty()) r.headers.emplace_back("X-Log-Attempt", read.attempt_id);
}

// Follows one attempt's log: the first read happened in the handler (so
// that a 404 is a real 404); then each call reads on from next_offset.
struct LogFollower {
  ControlPlane& cp;
  Principal principal;
  std::string task_id;
  int attempt = 0;  // pinned to the attempt first seen when the caller asked for "latest"
  std::int64_t offset = 0;
  std::string pending;  // data of the first read, not yet sent
  bool finished = false;

  std::optional<std::string> next(bool& done) {
    if (!pending.empty()) {
      std::string out = std::move(pending);
      pending.clear();
      return out;
    }
    if (finished) {
      done = true;
      return std::nullopt;
    }
    auto r = cp.read_logs(principal, task_id, attempt, offset);
    if (!r.ok()) {
      spdlog::warn("logs: following {} stopped: {}", task_id, r.error().to_string());
      done = true;
      return std::nullopt;
    }
    absorb(*r);
    if (r->attempt_id.empty() && task_ended_without_attempt()) finished = true;
    if (!r->data.empty()) return std::move(r->data);
    if (finished) done = true;
    return std::nullopt;
  }

  void absorb(const LogRead& r) {
    offset = r.next_offset;
    if (attempt == 0 && !r.attempt_id.empty()) attempt = attempt_number_of(r.attempt_id);
    finished = r.finished;
  }

  // A task cancelled (or failed) before it ever ran has no log to wait for.
  bool task_ended_without_attempt() {
    auto t = cp.get_task(principal, task_id);
    if (!t.ok()) return true;
    auto it = t->find("state");
    if (it == t->end() || !it->value().is_string()) return false;
    TaskState st{};
    if (!boost::describe::enum_from_string(std::string(it->value().as_string()).c_str(), st)) return false;
    return is_terminal(st);
  }
};

bool wants_csv(const Request& req) { return req.header("accept").find("text/csv") != std::string::npos; }

std::string csv_field(const json::value& v) {
  std::string s;
  if (v.is_string()) {
    s = std::string(v.as_string());
  } else if (v.is_double()) {
    s = fmt::format("{}", v.as_double());
  } else if (v.is_int64()) {
    s = std::to_string(v.as_int64());
  } else if (v.is_uint64()) {
    s = std::to_string(v.as_uint64());
  } else if (v.is_bool()) {
    s = v.as_bool() ? "true" : "false";
  } else if (!v.is_null()) {
    s = json::serialize(v);
  }
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// Columns: the group keys in the order asked, then the figures in the
// order the rows carry them.
std::string usage_csv(const json::array& rows, const std::vector<std::string>& group_by) {
  std::vector<std::string> cols(group_by);
  for (const auto& row : rows) {
    if (!row.is_object()) continue;
    for (const auto& kv : row.as_object()) {
      std::string k(kv.key());
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    }
  }
  std::string out;
  for (std::size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + csv_field(json::value(cols[i]));
  out += "\r\n";
  for (const auto& row : rows) {
    if (!row.is_object()) continue;
    const auto& o = row.as_object();
    for (std::size_t i = 0; i < cols.size(); ++i) {
      if (i) out += ',';
      auto it = o.find(cols[i]);
      if (it != o.end()) out += csv_field(it->value());
    }
    out += "\r\n";
  }
  return out;
}


}  // namespace

void add_task_routes(Router& router, ControlPlane& cp) {
  router.add("POST", "/api/v1/pipelines",
             {.summary = "Submit a pipeline",
              .tag = "pipelines",
              .body = BodyKind::document,
              .body_description = "a Pipeline document in YAML (application/yaml) or JSON",
              .response = "{\"pipeline\": Pipeline, \"tasks\": [{\"id\",\"name\",\"state\"}]}",
              .success_status = 201,
              .query = {{.name = "dry_run",
                         .description = "true: check everything and create nothing (200 with the tasks it would make)",
                         .type = "boolean"}},
              .description =
                  "Header Idempotency-Key (optional, 1..255 printable ASCII, else 400): a retry under the same key "
                  "and with the same body (byte for byte) creates nothing and gets the first answer again, with "
                  "the header Idempotent-Replayed: true; the same key with another body is 422 "
                  "idempotency_key_reused. Keys are per user, kept 24 hours, stored only for accepted submits; "
                  "a dry run ignores them."},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto dry_run, bool_param(req, "dry_run", false));
               CP_ASSIGN(auto doc, document_body(req));
               ControlPlane::SubmitRequest submit{.dry_run = dry_run};
               if (auto key = req.headers.find("idempotency-key"); key != req.headers.end()) {
                 submit.idempotency_key = key->second;
                 // The body as received: a retry sends the same bytes.
                 submit.request_hash = sha256_hex(req.body);
               }
               // The busiest change: its audit row goes in with the tasks,
               // in one transaction (one commit a submit, not two).
               std::optional<AuditEntry> audit;
               if (!dry_run) {
                 audit = audit_entry(req, p.user, &doc);
                 audit->status = 201;
                 submit.audit = &*audit;
               }
               CP_ASSIGN(auto out, cp.submit(p, doc, submit));
               // A replay wrote nothing, its audit row neither: the router's
               // audit hook records it as it does any request.
               req.audited = audit.has_value() && !out.replayed;
               Response r = ok_json(out.body, out.status);
               if (out.replayed) r.with_header("Idempotent-Replayed", "true");
               return r;
             }));

  router.add("GET", "/api/v1/pipelines/{id}",
             {.summary = "A pipeline and its tasks",
              .tag = "pipelines",
              .response = "{\"pipeline\": Pipeline, \"tasks\": [Task...]}"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto out, cp.get_pipeline(p, req.param("id")));
               return ok_json(out);
             }));

  router.add("GET", "/api/v1/tasks",
             {.summary = "List tasks, newest first",
              .tag = "tasks",
              .response = "list of Task",
              .query = {{.name = "state",
                         .description = "Queued, Admitted, Dispatched, Running, Preempting, Lost, Succeeded, Failed "
                                        "or Cancelled; several separated by commas"},
                        {.name = "project_group"},
                        {.name = "resource_group"},
                        {.name = "cluster", .description = "the cluster the task was placed on"},
                        {.name = "pipeline", .description = "a pipeline id"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"},
                        {.name = "cursor", .description = "next_cursor of the previous page"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               TaskQuery q;
               CP_ASSIGN(q.states, states_param(req));
               CP_ASSIGN(q.limit, limit_param(req));
               q.project_group = req.query_param("project_group");
               q.resource_group = req.query_param("resource_group");
               q.cluster = req.query_param("cluster");
               q.pipeline_id = req.query_param("pipeline");
               q.cursor = req.query_param("cursor");
               CP_ASSIGN(auto page, cp.list_tasks(p, std::move(q)));
               return list_of(page.items, page.next_cursor);
             }));

  router.add("GET", "/api/v1/tasks/{id}",
             {.summary = "A task with its attempts", .tag = "tasks", .response = "Task plus \"attempts\": [Attempt...]"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto out, cp.get_task(p, req.param("id")));
               return ok_json(out);
             }));

  router.add("POST", "/api/v1/tasks/{id}/cancel",
             {.summary = "Cancel a task (running attempts are stopped with their grace period)",
              .tag = "tasks",
              .response = "Task"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto task, cp.cancel_task(p, req.param("id")));
               return ok_json(to_json(task));
             }));

  router.add("GET", "/api/v1/tasks/{id}/explain",
             {.summary = "Why a task is pending, or where it ran",
              .tag = "tasks",
              .response = "{\"task_id\",\"state\",\"reasons\":[PendingReason],\"attempts\",\"summary\",\"summary_zh\"}"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto out, cp.explain_task(p, req.param("id")));
               return ok_json(out);
             }));

  router.add("GET", "/api/v1/tasks/{id}/logs",
             {.summary = "An attempt's log; with follow=true, streamed until the attempt ends",
              .tag = "tasks",
              .response = "the log as text/plain (chunked when following); X-Log-Attempt names the attempt, "
                          "X-Log-Next-Offset where to continue",
              .response_content_types = {"text/plain"},
              .query = {{.name = "attempt", .description = "attempt number (default: the latest)", .type = "integer"},
                        {.name = "follow", .description = "stream until the attempt ends", .type = "boolean"},
                        {.name = "offset", .description = "byte offset to start from", .type = "integer"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto attempt, int_param(req, "attempt", 0, 0, 1'000'000));
               CP_ASSIGN(auto follow, bool_param(req, "follow", false));
               CP_ASSIGN(auto offset, int_param(req, "offset", 0, 0, std::numeric_limits<std::int64_t>::max()));
               const std::string id = req.param("id");
               CP_ASSIGN(auto first, cp.read_logs(p, id, static_cast<int>(attempt), offset));
               if (!follow) {
                 Response r = text_response(200, first.data);
                 add_log_headers(r, first);
                 r.headers.emplace_back("X-Log-Next-Offset", std::to_string(first.next_offset));
                 r.headers.emplace_back("X-Log-Finished", first.finished ? "true" : "false");
                 return r;
               }
               auto follower = std::make_shared<LogFollower>(LogFollower{cp, p, id, static_cast<int>(attempt)});
               follower->pending = std::move(first.data);
               follower->absorb(first);
               Response r = text_response(200, "");
               add_log_headers(r, first);
               r.headers.emplace_back("Cache-Control", "no-cache");
               r.headers.emplace_back("X-Content-Type-Options", "nosniff");
               auto s = std::make_shared<Stream>();
               s->wake = &cp.log_signal();
               s->poll_interval_ms = 1000;
               s->max_total_ms = 6 * 3'600'000;
               s->next = [follower](bool& done) { return follower->next(done); };
               r.stream = std::move(s);
               return r;
             }));

  router.add("GET", "/api/v1/events",
             {.summary = "The event log (every state change), oldest first",
              .tag = "events",
              .response = "list of Event; next_cursor is the id to pass as after",
              .query = {{.name = "object_kind", .description = "task, attempt, cluster, node, resource_group, ..."},
                        {.name = "object_id"},
                        {.name = "after", .description = "only events with a larger id", .type = "integer"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               EventQuery q;
               q.object_kind = req.query_param("object_kind");
               q.object_id = req.query_param("object_id");
               CP_ASSIGN(q.after_id, int_param(req, "after", 0, 0, std::numeric_limits<std::int64_t>::max()));
               CP_ASSIGN(q.limit, limit_param(req));
               CP_ASSIGN(auto events, cp.list_events(p, q));
               std::string next;
               if (!events.empty() && static_cast<int>(events.size()) >= q.limit) next = std::to_string(events.back().id);
               return list_of(events, next);
             }));

  router.add("GET", "/api/v1/usage",
             {.summary = "Usage by group over a period (text/csv with Accept: text/csv)",
              .tag = "usage",
              .response = "{\"items\":[{group keys..., \"gpu_seconds\", \"cpu_core_seconds\", "
                          "\"memory_gib_seconds\", \"attempts\"}]}",
              .response_content_types = {"application/json", "text/csv"},
              .query = {{.name = "from",
                         .description = "date or RFC 3339 time (default: 30 days before to); the report covers the "
                                        "whole UTC days that [from, to) touches"},
                        {.name = "to", .description = "date or RFC 3339 time (default: now)"},
                        {.name = "group_by",
                         .description = "comma-separated: project_group, resource_group, cluster, gpu_type, user, "
                                        "outcome, day, month (default project_group)"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto to, time_param(req, "to", cp.clock().now_ms()));
               CP_ASSIGN(auto from, time_param(req, "from", to - 30 * kDayMs));
               auto group_by = split_list(req.query_param("group_by"));
               if (group_by.empty()) group_by.push_back("project_group");
               CP_ASSIGN(auto rows, cp.usage(p, from, to, group_by));
               if (wants_csv(req)) return text_response(200, usage_csv(rows, group_by), "text/csv; charset=utf-8");
               return list_response(std::move(rows));
             }));

  router.add("GET", "/api/v1/usage/advice",
             {.summary = "Request against measured use per step, with advice (\"requests 8 CPUs, uses 1.2 at p95: "
                         "2 would do\")",
              .tag = "usage",
              .response = "{\"items\":[{\"project_group\", \"step\", \"attempts\", \"samples\", \"request\", "
                          "\"cpu\", \"memory\", \"gpu\", \"advice\":[{\"resource\", \"kind\", \"suggest\"?, "
                          "\"message\", \"message_zh\"}]}]}",
              .query = {{.name = "days", .description = "the last N days, 1..90 (default 14)", .type = "integer"},
                        {.name = "project_group", .description = "only this project group"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto days, int_param(req, "days", 14, 1, 90));
               CP_ASSIGN(auto rows, cp.usage_advice(p, static_cast<int>(days), req.query_param("project_group")));
               return list_response(std::move(rows));
             }));

  router.add("POST", "/api/v1/usage/rebuild",
             {.summary = "Rebuild the usage ledger of whole months from the attempts' end events (admin)",
              .tag = "usage",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"from\": \"YYYY-MM\", \"to\"?: \"YYYY-MM\" (exclusive; default the month after from)}",
              .response = "{\"from\", \"to\", \"attempts\", \"rows_removed\", \"rows_written\"}"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               auto month = [&](const char* field, std::optional<Millis> fallback) -> Result<Millis> {
                 const auto* v = body.is_object() ? body.as_object().if_contains(field) : nullptr;
                 if (!v && fallback) return *fallback;
                 Millis t = 0;
                 if (!v || !v->is_string() || v->as_string().size() != 7 ||
                     !parse_time(std::string(v->as_string()) + "-01", t)) {
                   return errors::invalid(field, std::string(field) + " must be a month, YYYY-MM",
                                          std::string(field) + " 须为月份，格式 YYYY-MM");
                 }
                 return t;
               };
               CP_ASSIGN(auto from, month("from", std::nullopt));
               CP_ASSIGN(auto to, month("to", next_month_start(from)));
               CP_ASSIGN(auto out, cp.rebuild_usage(p, from, to));
               return ok_json(out);
             }));
}

}  // namespace cp::http::detail
