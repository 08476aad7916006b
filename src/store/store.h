// The metadata store. Everything durable goes through a Tx: the server opens
// one per request or per scheduling cycle, so that a task's state change and
// its event row are always written together or not at all.
//
//   store.write([&](Tx& tx) -> Status { ...reads and writes...; return {}; });
//
// A body that returns an error rolls the transaction back. Implementations
// (sqlite/, postgres/) pass one conformance suite (tests/store).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "store/change_journal.h"
#include "model/approval.h"
#include "model/monitoring.h"
#include "model/resource_use.h"
#include "model/types.h"

namespace cp {

struct TaskQuery {
  std::set<TaskState> states;              // empty = any
  std::optional<std::set<std::string>> project_groups;  // set = restrict to these (may be empty: nothing)
  std::string project_group;               // "" = any
  std::string resource_group;              // "" = any
  std::string cluster;                     // assigned cluster, "" = any
  std::string pipeline_id;                 // "" = any
  int limit = 100;                         // 1..1000
  std::string cursor;                      // opaque, from TaskPage::next_cursor
};

struct TaskPage {
  std::vector<Task> items;    // newest first: (created_at, id) descending
  std::string next_cursor;    // "" when there is no more
};

struct AgentCredential {
  std::string hash;
  std::string cluster_id;
  Millis created_at = 0;
  Millis expires_at = 0;
};

// One row of the usage ledger: what attempts that ended used, summed per UTC
// day and per (project group, resource group, cluster, user, GPU type, how
// the attempt ended). An attempt that spans midnight adds to both days.
// Integer units so that sums are exact: GPU-milliseconds, CPU
// core-milliseconds (millicores x ms / 1000) and memory MiB-seconds.
struct UsageRow {
  Millis day = 0;  // 00:00 UTC of the day
  std::string project_group;
  std::string resource_group;
  std::string cluster;
  std::string user;
  std::string gpu_type;  // "" for work without GPUs
  std::string outcome;   // the attempt's end state: Succeeded, Failed, Cancelled, Preempted, Lost
  std::int64_t attempts = 0;  // attempts that started on this day
  std::int64_t gpu_ms = 0;
  std::int64_t cpu_core_ms = 0;
  std::int64_t memory_mib_s = 0;
};

// What the attempts of one step of a project group really used
// (model/resource_use.h), merged per UTC day of their end, with the request
// they ran with: per replica, of the latest of them.
struct ResourceUseRow {
  Millis day = 0;  // 00:00 UTC of the day the attempts ended
  std::string project_group;
  std::string step;  // "<pipeline name>/<step name>"
  std::int64_t attempts = 0;
  Resources request;
  Millis request_at = 0;  // end of the attempt whose request that is
  ResourceUse use;
};
BOOST_DESCRIBE_STRUCT(ResourceUseRow, (), (day, project_group, step, attempts, request, request_at, use))
// Adds `row`'s attempts and use to `into`; the later request wins.
inline void merge_use_row(ResourceUseRow& into, const ResourceUseRow& row) {
  into.attempts += row.attempts;
  into.use.merge(row.use);
  if (row.request_at >= into.request_at) {
    into.request = row.request;
    into.request_at = row.request_at;
  }
}

// Sums of the ledger over [from_day, to_day), grouped by the named columns
// (any of day, project_group, resource_group, cluster, user, gpu_type,
// outcome); columns not named come back empty (day: 0).
struct UsageQuery {
  Millis from_day = 0;
  Millis to_day = 0;
  std::vector<std::string> group_by;
};

// Alerts, newest first by (started_at, id).
struct AlertQuery {
  std::set<AlertState> states;  // empty = any
  int limit = 100;              // 1..1000
  std::string cursor;           // opaque, from AlertPage::next_cursor
};

struct AlertPage {
  std::vector<Alert> items;
  std::string next_cursor;  // "" when there is no more
};

// The audit log, newest first by (at, id).
struct AuditQuery {
  std::string user;  // "" = anyone
  Millis from = 0;   // at >= from
  Millis to = 0;     // at < to; 0 = no end
  int limit = 100;   // 1..1000
  std::string cursor;
};

struct AuditPage {
  std::vector<AuditEntry> items;
  std::string next_cursor;
};

// Approvals, newest first by (created_at, id).
struct ApprovalQuery {
  std::optional<std::set<std::string>> project_groups;  // set = only these (may be empty: none)
  std::string project_group;   // "" = any
  std::string resource_group;  // "" = any
  std::set<ApprovalState> states;  // empty = any
  int limit = 100;
  std::string cursor;
};

struct ApprovalPage {
  std::vector<Approval> items;
  std::string next_cursor;
};

// What a submit under an idempotency key answered (POST /api/v1/pipelines
// with Idempotency-Key), kept so that a retry of it gets the same answer
// instead of a second pipeline. One row per (user, key).
struct IdempotencyRecord {
  std::string user;
  std::string key;
  std::string request_hash;  // hex SHA-256 of the request body as received
  int status = 0;            // the HTTP status answered
  std::string response;      // the JSON answered, as text
  Millis created_at = 0;
};

// Nodes a page at a time, by (cluster, name) in bytes order.
struct NodeQuery {
  std::string cluster_id;  // "" = every cluster
  int limit = 100;         // 1..1000
  std::string cursor;      // "<cluster>/<name>" of the last node of the previous page
};

struct NodePage {
  std::vector<Node> items;
  std::string next_cursor;  // "" on the last page
};

struct EventQuery {
  std::string object_kind;  // "" = any
  std::string object_id;    // "" = any
  std::int64_t after_id = 0;
  int limit = 100;
  std::string type;  // "" = any
};

// The rows a write transaction wrote (Tx::keep_written).
struct WrittenRows {
  std::uint64_t writer = 0;  // the mark of its journal entry (ChangeJournal::new_writer)
  std::vector<Task> tasks;
  std::vector<Attempt> attempts;
  bool complete = true;  // false: it also deleted rows, which are not kept here
  void clear() {
    tasks.clear();
    attempts.clear();
    complete = true;
  }
};

class Tx {
 public:
  virtual ~Tx() = default;

  // The task and attempt ids this transaction wrote so far (change_journal.h);
  // the backend publishes them after COMMIT.
  ChangedRows take_changed() {
    written_tasks_.clear();
    ChangedRows out = std::move(changed_);
    changed_ = ChangedRows{};
    return out;
  }

  // Keeps a copy of every task and attempt row this transaction inserts or
  // updates into `rows`, in the order written, for a caller that holds its
  // own copy of those rows and brings it up to date after COMMIT (the
  // scheduler's live work). The ids still go to the change journal, in an
  // entry marked rows->writer: once the caller has applied the rows, it
  // drops that entry (ChangeJournal::forget) instead of reading them back.
  // A deleted task leaves rows->complete false (nothing to copy).
  void keep_written(WrittenRows* rows) {
    kept_ = rows;
    changed_.writer = rows != nullptr ? rows->writer : 0;
  }

  // Whether, inside this write transaction, the store's change journal
  // names every task and attempt row that committed writes changed, once a
  // mark is taken (LiveWork::mark). Then a reader kept up to date from the
  // journal in this transaction holds the rows as stored, except those
  // wrote_task() names. SqliteStore: yes, one writer publishes each group
  // before the next begins (rows another process writes to the same file
  // are not named; live_work.h). Default (PostgreSQL): no, a concurrent
  // writer publishes after its COMMIT, possibly after this one began.
  virtual bool journal_is_current() const { return false; }
  // Whether this transaction wrote task `id` so far, in this body or in an
  // earlier body of the same group commit: changes no journal names yet.
  bool wrote_task(const std::string& id) const {
    return written_tasks_.contains(id) || (earlier_tasks_ != nullptr && earlier_tasks_->contains(id));
  }

  // From here to the end of the body, writes whose outcome the body does not
  // read may be held back and sent together: PostgreSQL sends inserts of new
  // rows (tasks, pipelines, attempts, events, audit entries) and task updates
  // with the body's next other statement or with COMMIT, in one round trip,
  // instead of a round trip per row. A held write's error then comes from
  // that later call, or from write() itself (a unique violation is the same
  // already_exists), and append_event returns 0. For bodies that end at any
  // error (a submit, the scheduler's apply). SQLite has no round trips to
  // save and writes at once.
  virtual void hold_writes() {}

  // The database server's own time now (ms since the epoch), for servers
  // that share it (common/clock.h, OffsetClock); unsupported where only one
  // process uses the store (SQLite: the process's clock is the store's).
  virtual Result<Millis> store_time_ms() {
    return errors::unavailable("this store has no clock of its own", "该存储没有自己的时钟");
  }

  // Free-form settings (e.g. "admin_token_created").
  virtual Result<std::optional<std::string>> get_meta(const std::string& key) = 0;
  virtual Status set_meta(const std::string& key, const std::string& value) = 0;

  // Users and API tokens.
  virtual Status upsert_user(const User& u) = 0;
  virtual Result<std::optional<User>> get_user(const std::string& name) = 0;
  virtual Result<std::vector<User>> list_users() = 0;
  virtual Status insert_token(const ApiToken& t) = 0;
  virtual Result<std::optional<ApiToken>> find_token_by_hash(const std::string& hash) = 0;
  virtual Result<std::vector<ApiToken>> list_tokens(const std::string& user) = 0;
  virtual Status delete_token(const std::string& id) = 0;

  // Clusters. insert fails with already_exists; update/delete with not_found.
  virtual Status insert_cluster(const Cluster& c) = 0;
  virtual Status update_cluster(const Cluster& c) = 0;
  virtual Result<std::optional<Cluster>> get_cluster(const std::string& id) = 0;
  virtual Result<std::vector<Cluster>> list_clusters() = 0;
  virtual Status delete_cluster(const std::string& id) = 0;  // also its nodes and credentials

  // One-time bootstrap tokens and the agent credentials they are exchanged for.
  virtual Status insert_bootstrap_token(const std::string& hash, const std::string& cluster_id, Millis created_at,
                                        Millis expires_at) = 0;
  // Deletes and returns the cluster id if the token exists and is unexpired at `now`.
  virtual Result<std::optional<std::string>> consume_bootstrap_token(const std::string& hash, Millis now) = 0;
  virtual Status insert_agent_credential(const AgentCredential& c) = 0;
  virtual Result<std::optional<AgentCredential>> find_agent_credential(const std::string& hash) = 0;
  virtual Status delete_agent_credentials_before(const std::string& cluster_id, Millis expires_before) = 0;

  // Nodes. upsert keeps label_overrides and maintenance (admin-owned fields)
  // of an existing row; set_node_admin changes only those.
  virtual Status upsert_node(const Node& n) = 0;
  virtual Status set_node_admin(const std::string& cluster_id, const std::string& name, const Labels& overrides,
                                bool maintenance) = 0;
  virtual Result<std::optional<Node>> get_node(const std::string& cluster_id, const std::string& name) = 0;
  // The named nodes of one cluster that exist, by name, in statements of
  // many names each (a plan's apply reads every node it places on).
  virtual Result<std::vector<Node>> get_nodes(const std::string& cluster_id, const std::vector<std::string>& names) = 0;
  virtual Result<std::vector<Node>> list_nodes(const std::string& cluster_id /* "" = all */) = 0;
  virtual Result<NodePage> list_nodes_page(const NodeQuery& q) = 0;
  virtual Status delete_node(const std::string& cluster_id, const std::string& name) = 0;

  // Resource groups, project groups, priority classes: upsert by name.
  virtual Status upsert_resource_group(const ResourceGroup& rg) = 0;
  virtual Result<std::optional<ResourceGroup>> get_resource_group(const std::string& name) = 0;
  virtual Result<std::vector<ResourceGroup>> list_resource_groups() = 0;
  virtual Status delete_resource_group(const std::string& name) = 0;
  virtual Status upsert_project_group(const ProjectGroup& pg) = 0;
  virtual Result<std::optional<ProjectGroup>> get_project_group(const std::string& name) = 0;
  virtual Result<std::vector<ProjectGroup>> list_project_groups() = 0;
  virtual Status delete_project_group(const std::string& name) = 0;
  virtual Status upsert_priority_class(const PriorityClass& pc) = 0;
  virtual Result<std::optional<PriorityClass>> get_priority_class(const std::string& name) = 0;
  virtual Result<std::vector<PriorityClass>> list_priority_classes() = 0;
  virtual Status delete_priority_class(const std::string& name) = 0;

  // Pipelines and tasks. Tasks are written whole; callers pair every state
  // change with append_event in the same Tx.
  virtual Status insert_pipeline(const Pipeline& p) = 0;
  virtual Result<std::optional<Pipeline>> get_pipeline(const std::string& id) = 0;
  virtual Status insert_task(const Task& t) = 0;
  virtual Status update_task(const Task& t) = 0;
  virtual Result<std::optional<Task>> get_task(const std::string& id) = 0;
  // The tasks of these ids that exist, in no particular order: one statement
  // per 1,000 ids instead of a get_task (a round trip on PostgreSQL) each.
  virtual Result<std::vector<Task>> get_tasks(const std::vector<std::string>& ids) = 0;
  virtual Result<TaskPage> list_tasks(const TaskQuery& q) = 0;
  // Every task in one of `states`, oldest first (for the scheduler snapshot).
  virtual Result<std::vector<Task>> tasks_in_states(const std::set<TaskState>& states) = 0;
  virtual Result<std::vector<Task>> tasks_of_pipeline(const std::string& pipeline_id) = 0;
  // Counts by (resource_group, state) for metrics.
  virtual Result<std::vector<std::tuple<std::string, TaskState, std::int64_t>>> count_tasks() = 0;

  // Attempts.
  virtual Status insert_attempt(const Attempt& a) = 0;
  virtual Status update_attempt(const Attempt& a) = 0;
  virtual Result<std::optional<Attempt>> get_attempt(const std::string& id) = 0;
  // As get_tasks.
  virtual Result<std::vector<Attempt>> get_attempts(const std::vector<std::string>& ids) = 0;
  virtual Result<std::vector<Attempt>> attempts_of_task(const std::string& task_id) = 0;  // by number
  // Attempts not in a terminal state, of one cluster or ("") all.
  virtual Result<std::vector<Attempt>> active_attempts(const std::string& cluster_id) = 0;
  // The attempts of these clusters in `state`, by cluster and id (within
  // each thousand clusters asked): an index seek a cluster
  // (attempts_cluster_state), however many other attempts they hold.
  virtual Result<std::vector<Attempt>> attempts_in_state(AttemptState state,
                                                         const std::vector<std::string>& cluster_ids) = 0;

  // Events: append returns the id given to the row.
  virtual Result<std::int64_t> append_event(const Event& e) = 0;
  virtual Result<std::vector<Event>> list_events(const EventQuery& q) = 0;
  // The id of the first event at or after `at` (0 when there is none): where
  // a walk by id over the events since a time starts.
  virtual Result<std::int64_t> first_event_since(Millis at) = 0;

  // The usage ledger. add_usage adds each row to the row of the same key
  // (creating it at zero); rows of the same key in one call add up.
  virtual Status add_usage(const std::vector<UsageRow>& rows) = 0;
  // Ordered by the group_by columns; 400 for an unknown column.
  virtual Result<std::vector<UsageRow>> usage_totals(const UsageQuery& q) = 0;
  // Removes the ledger of the whole months [from_month, to_month) (both the
  // first instant of a month), daily and monthly rows alike; returns the
  // daily rows removed. 400 when the bounds are not month starts.
  virtual Result<std::int64_t> delete_usage_months(Millis from_month, Millis to_month) = 0;

  // Measured use (ResourceUseRow): add merges the row into the row of the
  // same (day, project group, step), creating it; the request of the later
  // request_at wins. Read: rows with from_day <= day < to_day, of one
  // project group or ("") all, by project group, step, day.
  virtual Status add_resource_use(const ResourceUseRow& row) = 0;
  virtual Result<std::vector<ResourceUseRow>> resource_use(Millis from_day, Millis to_day,
                                                           const std::string& project_group) = 0;
  virtual Result<std::int64_t> delete_resource_use_before(Millis day, int limit) = 0;

  // Retention, a batch at a time (at most `limit` rows each call).
  // Deletes events with at < before, oldest first; returns how many.
  virtual Result<std::int64_t> delete_events_before(Millis before, int limit) = 0;
  // Ids of finished tasks (Succeeded, Failed, Cancelled) last changed before
  // `before`, in no particular order.
  virtual Result<std::vector<std::string>> finished_tasks_before(Millis before, int limit) = 0;
  // Deletes a task with its attempts and the events about them, and its
  // pipeline once no task of it is left. not_found if there is no such task.
  virtual Status delete_task(const std::string& id) = 0;

  // Each cluster's history (ClusterSample): add_cluster_samples adds each
  // row to the row of the same (cluster, width, bucket), creating it at
  // zero. cluster_samples returns the rows of one width with
  // from <= bucket < to, by cluster then bucket.
  virtual Status add_cluster_samples(const std::vector<ClusterSample>& rows) = 0;
  virtual Result<std::vector<ClusterSample>> cluster_samples(std::int64_t width_s, Millis from, Millis to) = 0;
  virtual Result<std::int64_t> delete_cluster_samples_before(std::int64_t width_s, Millis before, int limit) = 0;

  // Alerts, written whole. open_alerts: those pending or firing, and
  // resolved ones with a delivery still pending.
  virtual Status upsert_alert(const Alert& a) = 0;
  virtual Result<std::vector<Alert>> open_alerts() = 0;
  virtual Result<AlertPage> list_alerts(const AlertQuery& q) = 0;
  virtual Status delete_alert(const std::string& id) = 0;  // not_found if there is none
  // Resolved alerts (nothing left to deliver) resolved before `before`.
  virtual Result<std::int64_t> delete_alerts_resolved_before(Millis before, int limit) = 0;

  // The audit log: append-only but for retention.
  virtual Status append_audit(const AuditEntry& e) = 0;
  virtual Result<AuditPage> list_audit(const AuditQuery& q) = 0;
  virtual Result<std::int64_t> delete_audit_before(Millis before, int limit) = 0;

  // Approvals, written whole.
  virtual Status upsert_approval(const Approval& a) = 0;
  virtual Result<std::optional<Approval>> get_approval(const std::string& id) = 0;
  virtual Result<ApprovalPage> list_approvals(const ApprovalQuery& q) = 0;

  // Idempotency keys of submits. insert fails with already_exists when the
  // user holds the key already (a unique key on (user, key): of two
  // concurrent submits under one key, one commits); after hold_writes(),
  // from a later call or from write() itself.
  virtual Status insert_idempotency(const IdempotencyRecord& r) = 0;
  virtual Result<std::optional<IdempotencyRecord>> get_idempotency(const std::string& user,
                                                                    const std::string& key) = 0;
  // Deletes keys created before `before`, oldest first; returns how many.
  virtual Result<std::int64_t> delete_idempotency_before(Millis before, int limit) = 0;

 protected:
  // Backends call these from every method that inserts, updates or deletes
  // a task or an attempt row.
  void noted_task(const Task& t) {
    note_task_id(t.id);
    if (kept_ != nullptr) kept_->tasks.push_back(t);
  }
  void noted_attempt(const Attempt& a) {
    changed_.attempts.push_back(a.id);
    if (std::find(changed_.clusters.begin(), changed_.clusters.end(), a.cluster_id) == changed_.clusters.end()) {
      changed_.clusters.push_back(a.cluster_id);
    }
    if (kept_ != nullptr) kept_->attempts.push_back(a);
  }
  void noted_deleted_task(const std::string& id) {
    note_task_id(id);
    if (kept_ != nullptr) kept_->complete = false;
  }
  // The tasks the earlier bodies of this transaction wrote (a group commit).
  void set_earlier_tasks(const std::unordered_set<std::string>* ids) { earlier_tasks_ = ids; }

 private:
  void note_task_id(const std::string& id) {
    changed_.tasks.push_back(id);
    written_tasks_.insert(id);
  }
  ChangedRows changed_;
  WrittenRows* kept_ = nullptr;
  std::unordered_set<std::string> written_tasks_;
  const std::unordered_set<std::string>* earlier_tasks_ = nullptr;
};

class Store {
 public:
  virtual ~Store() = default;
  // Creates or upgrades the schema (versioned migrations); idempotent.
  virtual Status migrate() = 0;
  // Runs `body` in a read-write transaction; commits if it returns ok.
  // Retries a bounded number of times when the database is busy.
  virtual Status write(const std::function<Status(Tx&)>& body) = 0;
  // write(), for a body that may share its transaction with other such
  // bodies (group commit: one COMMIT for many). It must read only through
  // `tx`, and nothing it does may depend on when the transaction's snapshot
  // was taken: it may be older than the body (no mark of in-memory state,
  // such as ChangeJournal::last(), taken inside it). A submit qualifies; the
  // scheduler's apply does not. A store that groups every write (SQLite:
  // one writer) runs it as write().
  virtual Status write_shared(const std::function<Status(Tx&)>& body) { return write(body); }
  // Runs `body` in a read-only transaction (a consistent snapshot).
  virtual Status read(const std::function<Status(Tx&)>& body) = 0;
  // Schema version after migrate().
  virtual int schema_version() = 0;
  // "sqlite" | "postgresql"
  virtual std::string backend() const = 0;
  // The ids of task and attempt rows each committed write() changed, or
  // nullptr for a store that does not say (its readers then read everything).
  virtual ChangeJournal* changes() { return nullptr; }
  // Several servers on one store (PostgreSQL): from now on, the task and
  // attempt ids that other processes' writes change go to changes() once
  // committed, and `heard` is told of them (on a thread of the store's
  // own), so that a submit on one server wakes the scheduler of another.
  // While the feed is cut, changes() reports ids lost (its reader reads
  // everything again). A store that only one process may use (SQLite,
  // store/server_lock.h) hears nothing: nobody else writes.
  using ChangesHeard = std::function<void(const ChangedRows&)>;
  virtual void follow_other_writers(ChangesHeard heard) { (void)heard; }
};

// Opens a store by URL: sqlite:///abs/path/db, sqlite::memory:, postgresql://... (any libpq URI, plus ?pool=N)
Result<std::unique_ptr<Store>> open_store(const std::string& url);

}  // namespace cp
