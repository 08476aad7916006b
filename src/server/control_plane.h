// The control plane's services: what the REST handlers call. It wires the
// store, the object store and the scheduler; it owns no sockets (src/http
// does) and reads time only from the injected Clock.
//
// Every method that changes state runs one store transaction and writes the
// events for the changes it makes. Methods taking a Principal check
// authorization themselves, so no handler can forget to.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "common/signal.h"
#include "model/protocol.h"
#include "model/types.h"
#include "objstore/object_store.h"
#include "server/audit_batch.h"
#include "server/beacon.h"
#include "server/fleet_nodes.h"
#include "server/live_inventory.h"
#include "server/live_work.h"
#include "server/principal.h"
#include "server/warm_schedule.h"
#include "store/store.h"

namespace cp {

struct ServerConfig {
  std::int64_t lease_ttl_s = 30;         // agents fence themselves after this minus a margin
  std::int64_t lost_after_s = 40;        // a silent cluster goes offline and its attempts are Lost
                                         // (with a beacon: at least L + F + m, server/beacon.h)
  // The beacon (server/beacon.h), once start_beacon() ran: G and p; 0 =
  // derived from lease_ttl_s (L/15 within 0.2..2 s, L/10 within 0.3..3 s).
  std::int64_t beacon_period_ms = 0;
  std::int64_t beacon_deadline_ms = 0;
  std::int64_t credential_ttl_s = 3600;  // agent credential lifetime
  std::int64_t bootstrap_ttl_s = 86400;  // one-time bootstrap token lifetime
  std::int64_t long_poll_max_ms = 10000;
  std::int64_t sync_interval_ms = 2000;
  std::int64_t log_chunk_max_bytes = 1 << 20;
  std::int64_t max_tasks_per_pipeline = 1000;
  // A waiting task whose reasons keep their codes but not their figures
  // (used quota, who holds the room) is written again at most this often;
  // a change of codes is written at the next cycle. 0: at every change.
  std::int64_t reasons_refresh_s = 60;
  // Of those figures past reasons_refresh_s, at most this many are written
  // a cycle, first the first the cycle tried; the others at the next
  // cycles. A long queue's counts move together (a quota change moves every
  // waiting task's), and one transaction writing all of them would hold
  // the store's writer for seconds (docs/benchmarks.md, "Server cycle").
  // 0: no limit.
  std::int64_t reasons_refresh_per_cycle = 10'000;
  // Retention (run_retention): what is older than its age goes, on a thread
  // of its own every retention_interval_s, at most retention_batch of each
  // kind a pass, in transactions of at most 100 tasks or 1,000 events, so a
  // big backlog is worked off over several passes without holding the store
  // for long. 0 keeps that kind forever (not for tmp/).
  std::int64_t tmp_retention_s = 7 * 86400;     // objects under tmp/, by age
  std::int64_t log_retention_s = 30 * 86400;    // log chunks, by age
  std::int64_t event_retention_s = 90 * 86400;  // events, by time
  std::int64_t task_retention_s = 180 * 86400;  // finished tasks, by last change, with their attempts,
                                                // events, logs and checkpoints (usage stays in the ledger)
  std::int64_t retention_interval_s = 3600;
  std::int64_t retention_batch = 1000;
  // Monitoring (alerts.cpp, overview.cpp), on a thread of its own: every
  // sample_interval_s each cluster's GPUs, allocation and utilization go to
  // its history (a bucket's gauges are the mean of its samples); every alert_interval_s the alert rules run and due
  // deliveries are made. History is kept by minute for history_minutes_s,
  // by hour for history_hours_s, by day for history_days_s.
  std::int64_t sample_interval_s = 15;
  std::int64_t alert_interval_s = 15;
  std::int64_t history_minutes_s = 2 * 86400;
  std::int64_t history_hours_s = 90 * 86400;
  std::int64_t history_days_s = 2 * 365 * 86400;
  std::int64_t alert_history_s = 90 * 86400;  // resolved alerts, by last change
  std::int64_t audit_retention_s = 365 * 86400;  // the audit log; 0 = keep
  std::int64_t use_history_s = 90 * 86400;       // measured use per step (request-vs-use advice), by day
  // Idempotency keys of submits (SubmitRequest), by age: retries come
  // within minutes, a day covers one after a long outage. 0 = keep.
  std::int64_t idempotency_retention_s = 86400;
  // Alert rules beside the resource groups' own watermarks (AlertPolicy).
  std::vector<std::string> alert_webhooks;  // receive every alert (Alertmanager webhook format)
  // Email receivers of every alert, sent through smtp_url: smtp://host[:port]
  // (upgraded with STARTTLS when the server offers it) or smtps://host[:port].
  // The login comes from CUBEPLANE_SMTP_USER / CUBEPLANE_SMTP_PASSWORD
  // (main.cpp), never from a config file; empty user = no AUTH.
  std::vector<std::string> alert_emails;
  std::string smtp_url;
  std::string smtp_from = "cubeplane@localhost";
  std::string smtp_user;
  std::string smtp_password;
  std::int64_t queue_wait_alert_s = 1800;   // oldest queued task of a group waits longer; 0 = off
  std::int64_t cluster_offline_for_s = 60;  // offline that long before it fires
  std::int64_t node_not_ready_for_s = 300;
  std::int64_t credential_warning_s = 86400;  // a silent agent's credential expires within this
  std::string external_url;                   // this server's address, for links in notifications
  // The scheduler's knobs (sched::SchedulerConfig, which documents them).
  bool fair_share = true;          // order within a group by dominant share after priority
  int reservations_per_group = 1;  // blocked tasks per group that hold what they wait for; 0: none
  int max_victims = 64;            // the most victims one preemption may pick
  // Keep the scheduler's indexed state between cycles (warm_schedule.h);
  // false: build it from the whole live work at every cycle (as before it;
  // for comparisons, e.g. cubeplane-bench-submit --cold-scheduler).
  bool warm_scheduler = true;
  // Each cycle, compare the scheduler's kept state (warm_schedule.h) with the
  // live work and fleet as read, field by field; a difference is logged,
  // counted (warm_check_failures()) and the state built again. Costs a full
  // pass over the running work per cycle: for the tests, not production,
  // and for cycles run between requests (as the tests do): a node commit
  // that has not yet bumped its cluster's generation (fleet_nodes.h) reads
  // as a difference for that one cycle.
  bool verify_warm_scheduler = false;
};

// What one scheduling cycle did, and how long each part took.
struct CycleStats {
  std::size_t queued = 0, running = 0, placed = 0, preempted = 0, waiting = 0;
  std::int64_t reasons_written = 0;  // waiting tasks whose stored reasons the apply wrote
  double load_ms = 0, decide_ms = 0, apply_ms = 0;
  // The apply's transactions: the plan's placements and preemptions in one,
  // then the waiting tasks' reasons in transactions of up to 1,000 tasks;
  // the longest of them, start to commit (the store's writer held).
  std::int64_t apply_writes = 0;
  double longest_write_ms = 0;
};

// Figures for /metrics, computed from the store (and the last cycle).
struct MetricsSnapshot {
  std::map<std::string, std::int64_t> queued_by_group;  // resource group -> queued tasks
  std::map<std::string, std::int64_t> tasks_by_state;
  // (resource group, resource) -> (used, guaranteed limit)
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> quota;
  std::map<std::string, std::string> cluster_states;  // cluster -> state
  // (rule, severity, state) -> alerts pending or firing; deliveries of
  // those (and of resolved ones still being told) pending or given up
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> alerts;
  std::int64_t alert_deliveries_failed = 0;
  std::int64_t alert_deliveries_pending = 0;
  CycleStats last_cycle;  // of this process (zeros before its first)
};

// A project group's use this month so far (the ledger plus running work).
struct MonthUse {
  double gpu_hours = 0;
  std::int64_t cost_cents = 0;
  std::string currency;  // "" without a price table
};

struct LogRead {
  std::string data;
  std::int64_t next_offset = 0;  // pass back to continue
  bool finished = false;         // the attempt has ended and everything was read
  std::string attempt_id;
};

class ControlPlane {
 public:
  ControlPlane(Store& store, ObjectStore& objects, const Clock& clock, ServerConfig config = {});
  ~ControlPlane();

  const ServerConfig& config() const { return config_; }
  const Clock& clock() const { return clock_; }
  Store& store() { return store_; }

  // First start: creates the user "admin" and returns its token (shown once;
  // only the hash is kept). Later starts return nullopt.
  Result<std::optional<std::string>> ensure_admin_token();

  // ---------------------------------------------------------------- auth
  Result<Principal> authenticate(std::string_view bearer_token);
  Result<Principal> authenticate_agent(std::string_view bearer_token);

  Result<User> create_user(const Principal& p, const json::value& body);
  Result<std::vector<User>> list_users(const Principal& p);
  Result<json::object> create_token(const Principal& p, const std::string& user, const json::value& body);
  json::object whoami(const Principal& p);

  // ------------------------------------------------------ clusters & nodes
  Result<Cluster> create_cluster(const Principal& p, const json::value& body);
  Result<std::vector<Cluster>> list_clusters(const Principal& p);
  Result<Cluster> get_cluster(const Principal& p, const std::string& id);
  Result<Cluster> patch_cluster(const Principal& p, const std::string& id, const json::value& body);
  Status delete_cluster(const Principal& p, const std::string& id);
  Result<json::object> create_bootstrap_token(const Principal& p, const std::string& cluster_id,
                                              const json::value& body);
  // A platform admin states that the Unknown attempts of an offline cluster
  // are gone (its jobs checked: squeue, kubectl get pods): each ends Lost and
  // its task requeues in the cluster's storage pool, as a silent local
  // cluster's do (server/unknown_attempts.h). 403, 404, 409 for a cluster
  // that is not offline (its agent reports its attempts itself); nothing
  // Unknown: nothing changes. {"cluster", "confirmed": [{attempt, task,
  // requeued}], "message", "message_zh"}.
  Result<json::object> confirm_lost(const Principal& p, const std::string& cluster_id);
  // How many attempts of each of these clusters are Unknown (absent: none).
  Result<std::map<std::string, std::int64_t>> unknown_attempt_counts(const std::vector<std::string>& cluster_ids);
  // A page of nodes (404 for an unknown cluster), and one node.
  Result<NodePage> list_nodes_page(const Principal& p, const NodeQuery& q);
  Result<Node> get_node(const Principal& p, const std::string& cluster_id, const std::string& name);
  Result<Node> patch_node(const Principal& p, const std::string& cluster_id, const std::string& name,
                          const json::value& body);

  // ------------------------------------- groups and classes (documents)
  // kind: "ResourceGroup" | "ProjectGroup" | "PriorityClass". `path_name` is
  // the {name} of PUT (must equal metadata.name); nullopt for POST, which
  // refuses an existing name. Returns {document, created}.
  Result<std::pair<json::object, bool>> apply_document(const Principal& p, const std::string& kind,
                                                       const json::value& doc,
                                                       const std::optional<std::string>& path_name);
  Result<json::object> get_document(const Principal& p, const std::string& kind, const std::string& name);
  Result<json::array> list_documents(const Principal& p, const std::string& kind);
  Status delete_document(const Principal& p, const std::string& kind, const std::string& name);

  // ------------------------------------------------ pipelines and tasks
  // A submit as POST /api/v1/pipelines makes it.
  struct SubmitRequest {
    // Every check, nothing written: {"dry_run": true, "pipeline", "tasks":
    // [{name, state, resources}]}, 200.
    bool dry_run = false;
    // Not for a dry run: the request's audit row, outcome and all but
    // `after`, written in the submit's own transaction with the answer as
    // `after` (the HTTP route's; its audit hook then writes none).
    const AuditEntry* audit = nullptr;
    // The Idempotency-Key header (1..255 printable ASCII, else 400; nullopt:
    // none) and the hex SHA-256 of the body as received. Keys are the
    // user's own. The first submit under a key stores its answer in the
    // transaction that creates the pipeline; a later one with the same body
    // creates nothing and gets that answer (`replayed`); one with another
    // body is 422 idempotency_key_reused. A refused submit stores nothing,
    // so a corrected retry may succeed; a dry run neither reads nor stores
    // the key. Kept for idempotency_retention_s.
    std::optional<std::string> idempotency_key;
    std::string request_hash;
  };
  struct SubmitAnswer {
    json::object body;      // {"pipeline": ..., "tasks": [{id, name, state}]}
    int status = 201;       // 200 for a dry run; a replay's is the first answer's
    bool replayed = false;  // the stored answer of an earlier submit under the same key
  };
  Result<SubmitAnswer> submit(const Principal& p, const json::value& doc, const SubmitRequest& request);
  // submit() without an idempotency key: the answer's body.
  Result<json::object> submit_pipeline(const Principal& p, const json::value& doc, bool dry_run = false,
                                       const AuditEntry* audit = nullptr);
  Result<json::object> get_pipeline(const Principal& p, const std::string& id);
  Result<TaskPage> list_tasks(const Principal& p, TaskQuery q);
  // Task JSON plus "attempts".
  Result<json::object> get_task(const Principal& p, const std::string& id);
  Result<Task> cancel_task(const Principal& p, const std::string& id);
  Result<json::object> explain_task(const Principal& p, const std::string& id);
  // attempt_number 0 = the latest attempt. Reads from `offset` on.
  Result<LogRead> read_logs(const Principal& p, const std::string& task_id, int attempt_number,
                            std::int64_t offset);
  Result<std::vector<Event>> list_events(const Principal& p, const EventQuery& q);
  // group_by: any of project_group, resource_group, cluster, gpu_type, user, day, month.
  // With a price table, each row also has cost_cents, cost and currency.
  Result<json::array> usage(const Principal& p, Millis from, Millis to, const std::vector<std::string>& group_by);
  // Rebuilds the ledger of the whole months [from_month, to_month) from the
  // attempts' end events, in one transaction (admin). Refused (409) when
  // retention may have pruned events those months need, or when an end
  // event there lacks its usage data; then nothing changes. Returns
  // {from, to, attempts, rows_removed, rows_written}.
  Result<json::object> rebuild_usage(const Principal& p, Millis from_month, Millis to_month);
  // Request against measured use (server/advice.h) per step ("<pipeline>/
  // <step>") of the project groups `p` may read, or of one, over the last
  // `days` days (1..90): request, p50/p95/max use, and advice.
  Result<json::array> usage_advice(const Principal& p, int days, const std::string& project_group);
  // The price table (model/prices.h) as a document; anyone may read it, an
  // admin replaces it whole.
  Result<json::object> get_price_table(const Principal& p);
  Result<json::object> apply_price_table(const Principal& p, const json::value& doc);

  // --------------------------------------------------------------- agents
  // With a bootstrap token: exchanges it (one-time). With an empty bootstrap
  // token and `bearer` = the current credential: renews it.
  Result<RegisterResponse> agent_register(const RegisterRequest& req, std::string_view bearer);
  Result<SyncResponse> agent_sync(const Principal& agent, const SyncRequest& req);
  // Orders for a cluster right now, given the attempts its agent reported
  // (used to end a long-poll early). Empty when there is nothing to say.
  // `received_at`: when the sync they answer was taken up (SyncResponse::received_at).
  Result<SyncResponse> pending_orders(const std::string& cluster_id, const std::vector<AttemptReport>& reported,
                                      Millis received_at);
  Status agent_logs(const Principal& agent, const LogUpload& upload);
  // Notified when there is new work for the cluster (start or stop).
  Signal& cluster_signal(const std::string& cluster_id);
  // Notified when any log arrives or any attempt ends (log followers).
  Signal& log_signal() { return log_signal_; }

  // ------------------------------------------------------------ the loop
  // One scheduling cycle: snapshot -> decide -> apply in one transaction.
  Status schedule_once();
  // Cycles whose kept scheduler state differed from the live work
  // (ServerConfig::verify_warm_scheduler); 0 is the only right answer.
  std::int64_t warm_check_failures() const { return warm_check_failures_.load(); }
  // Task rows the scheduling cycles' applies read from the store so far
  // (placed tasks, waiting tasks whose reasons changed, preemptors); the
  // rest come from the live work (for the tests and the debug log).
  std::int64_t apply_task_reads() const { return apply_task_reads_.load(); }
  // Waiting tasks whose reasons the applies told apart by their words (the
  // rest by their figures, without wording them; for the tests).
  std::int64_t apply_reasons_worded() const { return apply_reasons_worded_.load(); }
  // What the last scheduling cycle did, and how long each part took (the
  // debug log and /metrics say the same).
  using CycleStats = cp::CycleStats;
  CycleStats last_cycle() const {
    std::lock_guard lock(last_cycle_mu_);
    return last_cycle_;
  }
  // Marks silent clusters offline and their attempts Lost (local executor)
  // or Unknown (Slurm, Kubernetes: server/unknown_attempts.h).
  Status check_liveness();
  // One retention pass (see ServerConfig); what it removed. `more` when a
  // kind filled its batch, so the next pass should follow soon.
  struct RetentionPass {
    std::int64_t tmp_objects = 0, log_objects = 0, events = 0, tasks = 0;
    std::int64_t history = 0;  // rows of cluster history, audit log, resolved alerts, measured use and
                               // idempotency keys
    bool more = false;
  };
  Result<RetentionPass> run_retention();
  // Runs schedule_once and check_liveness on a thread, woken by submissions
  // and syncs (and at least every `idle_ms`).
  void start_background(std::int64_t idle_ms = 1000);
  void stop_background();
  // The leader's beacon (server/beacon.h): takes a term, writes the first
  // beacon (an error when the store or the witness refuses: the server must
  // not start), then a round every G. From then on liveness is judged only
  // while the chain holds, silence counts from its J, and every sync names
  // the beacon to its agent. Without it (the unit tests), silence counts
  // from the server's start and agents have no witness. `run_rounds`
  // false: no thread; the caller runs beacon()->round() (tests).
  // `shared`: other servers may share the store (PostgreSQL, DESIGN.md
  // "Planes"): this one serves requests at once but runs the leader's loops
  // (scheduling, liveness, monitoring, retention) only while it holds the
  // term (BeaconChain::leading), and follows the other servers' writes
  // (Store::follow_other_writers) for its live work and its wake-ups.
  // `store_clock`: this control plane's clock, when it is an OffsetClock
  // that the chain keeps on the store's time (several servers).
  Status start_beacon(const std::string& server_id, const Clock& mono = BootTimeClock::instance(),
                      bool run_rounds = true, bool shared = false, OffsetClock* store_clock = nullptr);
  BeaconChain* beacon() { return beacon_.get(); }
  // Whether this server runs the leader's loops now: always without a
  // beacon (one server), else while its chain holds the store's term.
  bool leads() const { return !beacon_ || beacon_->leading(); }
  void wake_scheduler();

  // ------------------------------------------------------- monitoring
  // One sample of every cluster into its history (gauges).
  Status sample_fleet();
  // Runs the alert rules once: new alerts go pending, held ones fire,
  // cleared ones resolve (alert_rules.h).
  Status evaluate_alerts();
  // Makes the deliveries that are due; `send` posts one webhook and returns ""
  // or what went wrong (default: an HTTP POST); emails always go over SMTP.
  using AlertSend = std::function<std::string(const std::string& url, const std::string& json_body)>;
  void set_alert_sender(AlertSend send);
  Status deliver_alerts();
  // GET /api/v1/alerts: newest first; alerts about a project group only for
  // those who may read it.
  Result<AlertPage> list_alerts(const Principal& p, AlertQuery q);
  // GET /api/v1/overview: the fleet's heatmap over the last `hours`, totals,
  // and the firing alerts (see docs/rest-shapes.md).
  Result<json::object> overview(const Principal& p, std::int64_t hours);

  // -------------------------------------------------------- approvals
  // A member (or admin) of the project group asks to use a resource group
  // the group lists with `approval: required`: body {project_group,
  // resource_group, reason}. 409 while one is pending or holds.
  Result<Approval> request_approval(const Principal& p, const json::value& body);
  // verb: approve ({ttl_s?, note?}), deny ({note?}) a pending one, or revoke
  // ({note?}) an approved one; by an admin of the project group or a
  // platform admin.
  Result<Approval> decide_approval(const Principal& p, const std::string& id, const std::string& verb,
                                   const json::value& body);
  // Newest first; those of the caller's project groups (all for admins and viewers).
  Result<ApprovalPage> list_approvals(const Principal& p, ApprovalQuery q);

  // ------------------------------------------------------------ audit
  // Stores one change made through the API (the HTTP layer fills it; the id
  // and time are set here). Read by admins only.
  Status record_audit(AuditEntry e);
  struct AuditStats {
    AuditBatch::Stats batched;         // rows written after their request, in batches
    std::int64_t with_changes = 0;     // rows committed with their change (submits)
  };
  AuditStats audit_stats() const {
    return {audit_batch_.stats(), audit_with_changes_.load(std::memory_order_relaxed)};
  }
  Result<AuditPage> list_audit(const Principal& p, AuditQuery q);

  Result<MetricsSnapshot> metrics();
  bool store_healthy();

 private:
  // This month's use per project group, as `usage` reports it.
  Result<std::map<std::string, MonthUse>> month_to_date(Millis now);
  Status add_budget_status(const std::map<std::string, Budget>& budgets,
                           const std::function<json::object*(const std::string&)>& document_of);

  Store& store_;
  AuditBatch audit_batch_{store_};  // record_audit: rows of concurrent requests in one transaction
  std::atomic<std::int64_t> audit_with_changes_{0};
  ObjectStore& objects_;
  const Clock& clock_;
  ServerConfig config_;

  LiveInventory live_inventory_;
  FleetNodes fleet_nodes_;  // node summaries for the background passes
  // authenticate()'s answers; cleared after every change to users, tokens
  // or project groups (principal.h).
  PrincipalCache principals_;

  std::mutex signals_mu_;
  std::map<std::string, std::unique_ptr<Signal>> cluster_signals_;
  Signal log_signal_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool loop_wake_ = false;
  std::atomic<bool> loop_stop_{false};
  std::thread loop_;
  std::thread retention_;
  std::thread monitor_;
  std::mutex alert_mu_;  // alert_send_, and one evaluate/deliver at a time
  AlertSend alert_send_;
  std::condition_variable retention_cv_;  // with loop_mu_: wakes the retention thread to stop
  // The last contact of each cluster that is not offline, as this process
  // knows it (its syncs, and the last full liveness pass): check_liveness
  // reads every cluster only when one of these has gone silent, or every
  // kFullLivenessMs, not on each pass of the loop (a read and decode of the
  // whole fleet's cluster rows every second; docs/benchmarks.md, "Agent sync
  // load"). Only a hint: the full pass decides, from the store.
  std::mutex contacts_mu_;
  std::map<std::string, Millis, std::less<>> contacts_;
  Millis next_full_liveness_ = 0;
  // J of DESIGN.md "Fencing and outages": since when this server could hear
  // every agent and record it (its start; the store back after a liveness
  // pass failed on it; 0 while it cannot). A cluster's silence counts only
  // from then, so that the server's own outage, or the store's, never turns
  // into Lost or Unknown attempts. Under contacts_mu_.
  Millis judging_since_ = 0;
  std::unique_ptr<BeaconChain> beacon_;  // set once, before start_background
  void fill_witness(SyncResponse& resp);
  // What another server's write changed (Store::follow_other_writers): the
  // wake-ups its own writes would have made here.
  void heard_other_writes(const ChangedRows& rows);
  static constexpr Millis kFullLivenessMs = 10'000;
  // Serializes scheduling cycles (the background loop and tests).
  std::mutex schedule_mu_;
  LiveWork live_work_;  // under schedule_mu_
  SchedulerNodes scheduler_nodes_;  // under schedule_mu_
  WarmSchedule warm_schedule_;      // under schedule_mu_
  std::atomic<std::int64_t> warm_check_failures_{0};
  std::atomic<std::int64_t> apply_task_reads_{0};
  std::atomic<std::int64_t> apply_reasons_worded_{0};
  mutable std::mutex last_cycle_mu_;
  CycleStats last_cycle_;
  // After an apply's transaction committed: its rows into the live work, and
  // its journal entry dropped (checked against the store where
  // verify_warm_scheduler says so).
  Status kept_written(ChangeJournal* journal, WrittenRows& written);
  // Per waiting task, what the last apply left it with: the plan's reasons
  // (figures, where a reason keeps them) and a hash of the words stored. The
  // next apply tells an unchanged explanation by these, without wording it.
  struct Explained {
    sched::Reasons reasons;  // as stored
    std::uint64_t stored = 0;
    std::uint64_t cycle = 0;  // the apply that last explained it
    Millis current_since = 0;  // when the stored words were last the plan's (reasons_refresh_s)
  };
  std::unordered_map<std::string, Explained> explained_;  // under schedule_mu_
  std::uint64_t explained_cycle_ = 0;
};

}  // namespace cp
