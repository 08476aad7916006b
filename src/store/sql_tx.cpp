#include "store/sql_tx.h"

#include <algorithm>
#include <charconv>

#include "common/error.h"
#include "store/row_codec.h"

namespace cp {

// ------------------------------------------------------- tasks and attempts

namespace {

// Calls `each` with runs of at most sql::kMaxIdsAStatement of `ids`.
template <class Each>
Status in_chunks(const std::vector<std::string>& ids, Each each) {
  for (std::size_t from = 0; from < ids.size(); from += sql::kMaxIdsAStatement) {
    const auto to = std::min(ids.size(), from + sql::kMaxIdsAStatement);
    CP_TRY(each(std::span<const std::string>(ids.data() + from, to - from)));
  }
  return {};
}

}  // namespace

template <class T>
Result<std::vector<T>> SqlTx::by_ids(std::string_view table, const std::vector<std::string>& ids) {
  std::vector<T> out;
  out.reserve(ids.size());
  CP_TRY(in_chunks(ids, [&](std::span<const std::string> chunk) {
    return run_query(sql::by_ids(table, chunk, dialect()), [&](const Row& row) -> Status {
      CP_ASSIGN(auto value, decode_row<T>(row.text(0), table));
      out.push_back(std::move(value));
      return {};
    });
  }));
  return out;
}

Result<std::vector<Task>> SqlTx::get_tasks(const std::vector<std::string>& ids) { return by_ids<Task>("tasks", ids); }

Result<std::vector<Attempt>> SqlTx::get_attempts(const std::vector<std::string>& ids) {
  return by_ids<Attempt>("attempts", ids);
}

Result<std::vector<Attempt>> SqlTx::attempts_in_state(AttemptState state, const std::vector<std::string>& cluster_ids) {
  std::vector<Attempt> out;
  CP_TRY(in_chunks(cluster_ids, [&](std::span<const std::string> chunk) {
    return run_query(sql::attempts_in_state(state, chunk, dialect()), [&](const Row& row) -> Status {
      CP_ASSIGN(auto a, decode_row<Attempt>(row.text(0), "attempts"));
      out.push_back(std::move(a));
      return {};
    });
  }));
  return out;
}

// -------------------------------------------------------------------- usage

Status SqlTx::add_usage(const std::vector<UsageRow>& rows) {
  for (const auto& r : rows) {
    for (const auto& upsert : sql::add_usage(r)) CP_TRY(run_modify(upsert));
  }
  return {};
}

Result<std::vector<UsageRow>> SqlTx::usage_totals(const UsageQuery& q) {
  CP_ASSIGN(auto select, sql::usage_totals(q, dialect()));
  const auto columns = sql::usage_result_columns(q);
  std::vector<UsageRow> out;
  CP_TRY(run_query(select, [&](const Row& row) -> Status {
    UsageRow r;
    int i = 0;
    for (const auto& c : columns) {
      if (c == "day") r.day = row.int64(i);
      else sql::usage_field(r, c) = row.text(i);
      ++i;
    }
    r.attempts = row.int64(i);
    r.gpu_ms = row.int64(i + 1);
    r.cpu_core_ms = row.int64(i + 2);
    r.memory_mib_s = row.int64(i + 3);
    out.push_back(std::move(r));
    return {};
  }));
  return out;
}

Result<std::int64_t> SqlTx::delete_usage_months(Millis from_month, Millis to_month) {
  if (month_start(from_month) != from_month || month_start(to_month) != to_month || to_month < from_month) {
    return errors::invalid("months", "the ledger is removed by whole months: from and to must be month starts",
                           "用量账本按整月删除：起止时间须为月初");
  }
  CP_ASSIGN(auto days, run_modify({"DELETE FROM usage_daily WHERE day >= ? AND day < ?", {from_month, to_month}}));
  CP_TRY(run_modify({"DELETE FROM usage_monthly WHERE month >= ? AND month < ?", {from_month, to_month}}));
  return days;
}

// ------------------------------------------------------------- measured use

Status SqlTx::add_resource_use(const ResourceUseRow& row) {
  if (row.project_group.empty() || row.step.empty()) {
    return errors::invalid("resource_use", "a row of measured use needs a project group and a step",
                           "实测用量行需要项目组和步骤");
  }
  ResourceUseRow merged = row;
  CP_TRY(run_query({"SELECT doc FROM resource_use WHERE day = ? AND project_group = ? AND step = ?",
                    {row.day, row.project_group, row.step}},
                   [&](const Row& r) -> Status {
                     CP_ASSIGN(merged, decode_row<ResourceUseRow>(r.text(0), "resource_use"));
                     merge_use_row(merged, row);
                     return {};
                   }));
  CP_TRY(run_modify({"INSERT INTO resource_use (day, project_group, step, doc) VALUES (?, ?, ?, ?) ON CONFLICT "
                     "(day, project_group, step) DO UPDATE SET doc = excluded.doc",
                     {row.day, row.project_group, row.step, encode_row(merged)}}));
  return {};
}

Result<std::vector<ResourceUseRow>> SqlTx::resource_use(Millis from_day, Millis to_day,
                                                        const std::string& project_group) {
  const std::string order = " ORDER BY project_group" + std::string(dialect().bytewise) + ", step" +
                            std::string(dialect().bytewise) + ", day";
  sql::Statement s{"SELECT doc FROM resource_use WHERE day >= ? AND day < ?", {from_day, to_day}};
  if (!project_group.empty()) {
    s.text += " AND project_group = ?";
    s.args.emplace_back(project_group);
  }
  s.text += order;
  std::vector<ResourceUseRow> out;
  CP_TRY(run_query(s, [&](const Row& r) -> Status {
    CP_ASSIGN(auto row, decode_row<ResourceUseRow>(r.text(0), "resource_use"));
    out.push_back(std::move(row));
    return {};
  }));
  return out;
}

Result<std::int64_t> SqlTx::delete_resource_use_before(Millis day, int limit) {
  return run_modify({"DELETE FROM resource_use WHERE (day, project_group, step) IN (SELECT day, project_group, step "
                     "FROM resource_use WHERE day < ? ORDER BY day LIMIT ?)",
                     {day, std::int64_t{std::max(1, limit)}}});
}

// -------------------------------------------------------------------- nodes

namespace {

// A row of (doc, label_overrides, maintenance): the node with its admin-owned fields.
Result<Node> node_of(const SqlTx::Row& row) {
  CP_ASSIGN(Node node, decode_row<Node>(row.text(0), "nodes"));
  CP_ASSIGN(node.label_overrides, decode_row<Labels>(row.text(1), "nodes"));
  node.maintenance = row.int64(2) != 0;
  return node;
}

}  // namespace

Result<std::vector<Node>> SqlTx::get_nodes(const std::string& cluster_id, const std::vector<std::string>& asked) {
  std::vector<std::string> names = asked;  // each once, whatever the chunks
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<Node> out;
  out.reserve(names.size());
  CP_TRY(in_chunks(names, [&](std::span<const std::string> chunk) {
    return run_query(sql::nodes_by_name(cluster_id, chunk, dialect()), [&](const Row& row) -> Status {
      CP_ASSIGN(Node node, node_of(row));
      out.push_back(std::move(node));
      return {};
    });
  }));
  return out;
}

Result<NodePage> SqlTx::list_nodes_page(const NodeQuery& q) {
  const std::string by(dialect().bytewise);
  sql::Statement s{"SELECT doc, label_overrides, maintenance FROM nodes WHERE 1 = 1", {}};
  if (!q.cluster_id.empty()) {
    s.text += " AND cluster_id = ?";
    s.args.emplace_back(q.cluster_id);
  }
  if (!q.cursor.empty()) {
    const auto slash = q.cursor.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == q.cursor.size()) {
      return errors::invalid("cursor", "malformed cursor", "游标格式错误");
    }
    const std::string cluster = q.cursor.substr(0, slash), name = q.cursor.substr(slash + 1);
    s.text += " AND (cluster_id" + by + " > ? OR (cluster_id = ? AND name" + by + " > ?))";
    s.args.insert(s.args.end(), {cluster, cluster, name});
  }
  const int page = std::clamp(q.limit, 1, static_cast<int>(sql::kMaxPageSize));
  s.text += " ORDER BY cluster_id" + by + ", name" + by + " LIMIT ?";
  s.args.emplace_back(std::int64_t{page + 1});
  NodePage out;
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    CP_ASSIGN(Node node, node_of(row));
    out.items.push_back(std::move(node));
    return {};
  }));
  if (static_cast<int>(out.items.size()) > page) {
    out.items.resize(static_cast<std::size_t>(page));
    out.next_cursor = out.items.back().cluster_id + "/" + out.items.back().name;
  }
  return out;
}

// ------------------------------------------------------------------- events

Result<std::vector<Event>> SqlTx::list_events(const EventQuery& q) {
  sql::Statement s{"SELECT doc FROM events WHERE id > ?", {q.after_id}};
  for (const auto& [column, value] : {std::pair{"object_kind", &q.object_kind}, std::pair{"object_id", &q.object_id},
                                      std::pair{"type", &q.type}}) {
    if (value->empty()) continue;
    s.text += std::string(" AND ") + column + " = ?";
    s.args.emplace_back(*value);
  }
  s.text += " ORDER BY id LIMIT ?";
  s.args.emplace_back(std::int64_t{std::clamp(q.limit, 1, static_cast<int>(sql::kMaxPageSize))});
  std::vector<Event> out;
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    CP_ASSIGN(auto e, decode_row<Event>(row.text(0), "events"));
    out.push_back(std::move(e));
    return {};
  }));
  return out;
}

Result<std::int64_t> SqlTx::first_event_since(Millis at) {
  std::int64_t id = 0;
  CP_TRY(run_query({"SELECT COALESCE(MIN(id), 0) FROM events WHERE at >= ?", {at}}, [&](const Row& row) -> Status {
    id = row.int64(0);
    return {};
  }));
  return id;
}

// ---------------------------------------------------------------- retention

Result<std::int64_t> SqlTx::delete_events_before(Millis before, int limit) {
  return run_modify(sql::delete_events_before(before, limit));
}

Result<std::vector<std::string>> SqlTx::finished_tasks_before(Millis before, int limit) {
  std::vector<std::string> ids;
  CP_TRY(run_query(sql::finished_tasks_before(before, limit), [&](const Row& row) -> Status {
    ids.push_back(row.text(0));
    return {};
  }));
  return ids;
}

// ------------------------------------------------------- cluster history

namespace {

constexpr const char* kSampleSums[] = {"samples",  "gpus_total", "gpus_allocated", "gpu_util_sum",
                                       "gpu_util_devices", "dispatched", "wait_ms", "finished", "failed"};

std::vector<std::int64_t> sample_sums(const ClusterSample& s) {
  return {s.samples, s.gpus_total, s.gpus_allocated, s.gpu_util_sum, s.gpu_util_devices,
          s.dispatched, s.wait_ms, s.finished, s.failed};
}

bool valid_width(std::int64_t w) { return w == 60 || w == 3600 || w == 86400; }

Error bad_width(std::int64_t w) {
  return errors::invalid("width_s", "sample width must be 60, 3600 or 86400, not " + std::to_string(w),
                         "采样宽度必须是 60、3600 或 86400，而不是 " + std::to_string(w));
}

}  // namespace

Status SqlTx::add_cluster_samples(const std::vector<ClusterSample>& rows) {
  // One upsert per row: the sums of a new row are its values, of an
  // existing one the old plus the new.
  std::string cols = "cluster, width_s, bucket", marks = "?, ?, ?", sets;
  for (const char* c : kSampleSums) {
    cols += std::string(", ") + c;
    marks += ", ?";
    sets += sets.empty() ? "" : ", ";
    sets += std::string(c) + " = cluster_samples." + c + " + excluded." + c;
  }
  const std::string text = "INSERT INTO cluster_samples (" + cols + ") VALUES (" + marks +
                           ") ON CONFLICT (width_s, bucket, cluster) DO UPDATE SET " + sets;
  for (const auto& r : rows) {
    if (!valid_width(r.width_s)) return bad_width(r.width_s);
    if (r.bucket % (r.width_s * 1000) != 0) {
      return errors::invalid("bucket", "sample bucket is not a multiple of its width", "采样桶起点不是其宽度的整数倍");
    }
    sql::Statement s{text, {r.cluster, r.width_s, r.bucket}};
    for (auto v : sample_sums(r)) s.args.emplace_back(v);
    CP_TRY(run_modify(s));
  }
  return {};
}

Result<std::vector<ClusterSample>> SqlTx::cluster_samples(std::int64_t width_s, Millis from, Millis to) {
  if (!valid_width(width_s)) return bad_width(width_s);
  std::string cols;
  for (const char* c : kSampleSums) cols += std::string(", ") + c;
  sql::Statement s{"SELECT cluster, bucket" + cols +
                       " FROM cluster_samples WHERE width_s = ? AND bucket >= ? AND bucket < ? ORDER BY cluster" +
                       std::string(dialect().bytewise) + ", bucket",
                   {width_s, from, to}};
  std::vector<ClusterSample> out;
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    ClusterSample c;
    c.cluster = row.text(0);
    c.width_s = width_s;
    c.bucket = row.int64(1);
    std::int64_t* fields[] = {&c.samples,    &c.gpus_total, &c.gpus_allocated, &c.gpu_util_sum, &c.gpu_util_devices,
                              &c.dispatched, &c.wait_ms,    &c.finished,       &c.failed};
    for (int i = 0; i < 9; ++i) *fields[i] = row.int64(2 + i);
    out.push_back(std::move(c));
    return {};
  }));
  return out;
}

Result<std::int64_t> SqlTx::delete_cluster_samples_before(std::int64_t width_s, Millis before, int limit) {
  if (!valid_width(width_s)) return bad_width(width_s);
  // The key's leading columns find the oldest rows; a row value names them.
  return run_modify({"DELETE FROM cluster_samples WHERE (width_s, bucket, cluster) IN (SELECT width_s, bucket, cluster "
                     "FROM cluster_samples WHERE width_s = ? AND bucket < ? ORDER BY bucket LIMIT ?)",
                     {width_s, before, std::int64_t{std::max(1, limit)}}});
}

// ------------------------------------------------------------------ alerts

namespace {

// Open: still to watch (pending, firing) or to tell someone about.
bool is_open(const Alert& a) {
  if (a.state != AlertState::resolved) return true;
  return std::any_of(a.deliveries.begin(), a.deliveries.end(),
                     [](const AlertDelivery& d) { return d.state == "pending"; });
}

// "<ms>:<id>": where a page ordered by (time, id) descending ended.
std::string time_cursor(Millis at, const std::string& id) { return std::to_string(at) + ":" + id; }

Result<std::pair<Millis, std::string>> parse_time_cursor(const std::string& c) {
  auto colon = c.find(':');
  Millis at = 0;
  if (colon != std::string::npos) {
    auto [p, ec] = std::from_chars(c.data(), c.data() + colon, at);
    if (ec == std::errc() && p == c.data() + colon && colon + 1 < c.size()) {
      return std::pair<Millis, std::string>{at, c.substr(colon + 1)};
    }
  }
  return errors::invalid("cursor", "malformed cursor", "游标格式错误");
}

// Pages newest first by (time_col, id): appends where the page after
// `cursor` starts, the order, and a limit of one row more than the page (to
// tell whether another follows). Returns the page size.
Result<int> newest_first(sql::Statement& s, const std::string& time_col, const std::string& cursor, int limit,
                         const std::string& by) {
  if (!cursor.empty()) {
    CP_ASSIGN(auto after, parse_time_cursor(cursor));
    s.text += " AND (" + time_col + " < ? OR (" + time_col + " = ? AND id" + by + " < ?))";
    s.args.insert(s.args.end(), {after.first, after.first, after.second});
  }
  const int page = std::clamp(limit, 1, static_cast<int>(sql::kMaxPageSize));
  s.text += " ORDER BY " + time_col + " DESC, id" + by + " DESC LIMIT ?";
  s.args.emplace_back(std::int64_t{page + 1});
  return page;
}

// Cuts rows read by newest_first to the page; the next page's cursor or "".
template <class T, class TimeOf>
std::string cut_page(std::vector<T>& items, int page, TimeOf time_of) {
  if (static_cast<int>(items.size()) <= page) return "";
  items.resize(page);
  return time_cursor(time_of(items.back()), items.back().id);
}

}  // namespace

Status SqlTx::upsert_alert(const Alert& a) {
  if (a.id.empty() || a.fingerprint.empty()) {
    return errors::invalid("alert", "an alert needs an id and a fingerprint", "告警需要 id 和指纹");
  }
  CP_TRY(run_modify({"INSERT INTO alerts (id, fingerprint, state, is_open, started_at, updated_at, doc) VALUES "
                     "(?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, "
                     "state = excluded.state, is_open = excluded.is_open, started_at = excluded.started_at, "
                     "updated_at = excluded.updated_at, doc = excluded.doc",
                     {a.id, a.fingerprint, enum_name(a.state), std::int64_t{is_open(a) ? 1 : 0}, a.started_at,
                      a.updated_at, encode_row(a)}}));
  return {};
}

Result<std::vector<Alert>> SqlTx::open_alerts() {
  std::vector<Alert> out;
  CP_TRY(run_query({"SELECT doc FROM alerts WHERE is_open = 1 ORDER BY started_at, id" +
                        std::string(dialect().bytewise),
                    {}},
                   [&](const Row& row) -> Status {
                     CP_ASSIGN(auto a, decode_row<Alert>(row.text(0), "alerts"));
                     out.push_back(std::move(a));
                     return {};
                   }));
  return out;
}

Result<AlertPage> SqlTx::list_alerts(const AlertQuery& q) {
  const std::string by = std::string(dialect().bytewise);
  sql::Statement s{"SELECT doc FROM alerts WHERE 1 = 1", {}};
  if (!q.states.empty()) {
    std::vector<std::string> names;
    for (auto st : q.states) names.push_back(enum_name(st));
    sql::append_in(s, "state", names);
  }
  CP_ASSIGN(const int limit, newest_first(s, "started_at", q.cursor, q.limit, by));
  AlertPage page;
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    CP_ASSIGN(auto a, decode_row<Alert>(row.text(0), "alerts"));
    page.items.push_back(std::move(a));
    return {};
  }));
  page.next_cursor = cut_page(page.items, limit, [](const Alert& a) { return a.started_at; });
  return page;
}

Status SqlTx::delete_alert(const std::string& id) {
  CP_ASSIGN(auto n, run_modify({"DELETE FROM alerts WHERE id = ?", {id}}));
  if (n == 0) return errors::not_found("alert", id);
  return {};
}

Result<std::int64_t> SqlTx::delete_alerts_resolved_before(Millis before, int limit) {
  return run_modify({"DELETE FROM alerts WHERE id IN (SELECT id FROM alerts WHERE is_open = 0 AND updated_at < ? "
                     "ORDER BY updated_at LIMIT ?)",
                     {before, std::int64_t{std::max(1, limit)}}});
}

// --------------------------------------------------------------- approvals

Status SqlTx::upsert_approval(const Approval& a) {
  if (a.id.empty()) return errors::invalid("approval", "an approval needs an id", "审批需要 id");
  CP_TRY(run_modify({"INSERT INTO approvals (id, project_group, resource_group, state, created_at, doc) VALUES "
                     "(?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state, doc = excluded.doc",
                     {a.id, a.project_group, a.resource_group, enum_name(a.state), a.created_at, encode_row(a)}}));
  return {};
}

Result<std::optional<Approval>> SqlTx::get_approval(const std::string& id) {
  std::optional<Approval> out;
  CP_TRY(run_query({"SELECT doc FROM approvals WHERE id = ?", {id}}, [&](const Row& row) -> Status {
    CP_ASSIGN(auto a, decode_row<Approval>(row.text(0), "approvals"));
    out = std::move(a);
    return {};
  }));
  return out;
}

Result<ApprovalPage> SqlTx::list_approvals(const ApprovalQuery& q) {
  const std::string by = std::string(dialect().bytewise);
  ApprovalPage page;
  if (q.project_groups && q.project_groups->empty()) return page;
  sql::Statement s{"SELECT doc FROM approvals WHERE 1 = 1", {}};
  if (q.project_groups) sql::append_in(s, "project_group", {q.project_groups->begin(), q.project_groups->end()});
  if (!q.project_group.empty()) {
    s.text += " AND project_group = ?";
    s.args.emplace_back(q.project_group);
  }
  if (!q.resource_group.empty()) {
    s.text += " AND resource_group = ?";
    s.args.emplace_back(q.resource_group);
  }
  if (!q.states.empty()) {
    std::vector<std::string> names;
    for (auto st : q.states) names.push_back(enum_name(st));
    sql::append_in(s, "state", names);
  }
  CP_ASSIGN(const int limit, newest_first(s, "created_at", q.cursor, q.limit, by));
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    CP_ASSIGN(auto a, decode_row<Approval>(row.text(0), "approvals"));
    page.items.push_back(std::move(a));
    return {};
  }));
  page.next_cursor = cut_page(page.items, limit, [](const Approval& a) { return a.created_at; });
  return page;
}

// --------------------------------------------------------------- audit log

Status SqlTx::append_audit(const AuditEntry& e) {
  if (e.id.empty()) return errors::invalid("audit", "an audit entry needs an id", "审计记录需要 id");
  return run_insert({"INSERT INTO audit_log (id, at, user_name, doc) VALUES (?, ?, ?, ?)",
                     {e.id, e.at, e.user, encode_row(e)}},
                    "audit entry", e.id);
}

Result<AuditPage> SqlTx::list_audit(const AuditQuery& q) {
  const std::string by = std::string(dialect().bytewise);
  sql::Statement s{"SELECT doc FROM audit_log WHERE at >= ?", {q.from}};
  if (!q.user.empty()) {
    s.text += " AND user_name = ?";
    s.args.emplace_back(q.user);
  }
  if (q.to > 0) {
    s.text += " AND at < ?";
    s.args.emplace_back(q.to);
  }
  CP_ASSIGN(const int limit, newest_first(s, "at", q.cursor, q.limit, by));
  AuditPage page;
  CP_TRY(run_query(s, [&](const Row& row) -> Status {
    CP_ASSIGN(auto e, decode_row<AuditEntry>(row.text(0), "audit_log"));
    page.items.push_back(std::move(e));
    return {};
  }));
  page.next_cursor = cut_page(page.items, limit, [](const AuditEntry& e) { return e.at; });
  return page;
}

Result<std::int64_t> SqlTx::delete_audit_before(Millis before, int limit) {
  return run_modify({"DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < ? ORDER BY at LIMIT ?)",
                     {before, std::int64_t{std::max(1, limit)}}});
}

// -------------------------------------------------------- idempotency keys

Status SqlTx::insert_idempotency(const IdempotencyRecord& r) {
  if (r.user.empty() || r.key.empty()) {
    return errors::invalid("idempotency", "an idempotency key needs a user and a key", "幂等键需要用户和键");
  }
  return run_insert_unique({"INSERT INTO idempotency_keys (user_name, idempotency_key, request_hash, status, response, "
                            "created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            {r.user, r.key, r.request_hash, std::int64_t{r.status}, r.response, r.created_at}},
                           "idempotency key", r.key);
}

Result<std::optional<IdempotencyRecord>> SqlTx::get_idempotency(const std::string& user, const std::string& key) {
  std::optional<IdempotencyRecord> out;
  CP_TRY(run_query({"SELECT request_hash, status, response, created_at FROM idempotency_keys "
                    "WHERE user_name = ? AND idempotency_key = ?",
                    {user, key}},
                   [&](const Row& row) -> Status {
                     out = IdempotencyRecord{user, key, row.text(0), static_cast<int>(row.int64(1)), row.text(2),
                                             row.int64(3)};
                     return {};
                   }));
  return out;
}

Result<std::int64_t> SqlTx::delete_idempotency_before(Millis before, int limit) {
  return run_modify({"DELETE FROM idempotency_keys WHERE (user_name, idempotency_key) IN (SELECT user_name, "
                     "idempotency_key FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)",
                     {before, std::int64_t{std::max(1, limit)}}});
}

}  // namespace cp
