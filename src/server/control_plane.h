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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "common/signal.h"
#include "model/protocol.h"
#include "model/types.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace cp {

struct Principal {
  enum class Kind { user, agent };
  Kind kind = Kind::user;
  std::string user;  // user name, or "agent:<cluster>"
  PlatformRole role = PlatformRole::viewer;
  std::map<std::string, ProjectRole> project_roles;  // project group -> role
  std::string cluster_id;                            // agents only

  bool is_admin() const { return kind == Kind::user && role == PlatformRole::admin; }
  bool can_read_all() const { return is_admin() || (kind == Kind::user && role == PlatformRole::viewer); }
  bool can_read_project(const std::string& pg) const;
  bool can_submit_to(const std::string& pg) const;  // admin, or project admin/member
  bool can_admin_project(const std::string& pg) const;
};

struct ServerConfig {
  std::int64_t lease_ttl_s = 30;         // agents fence themselves after this minus a margin
  std::int64_t lost_after_s = 40;        // a silent cluster goes offline and its attempts are Lost
  std::int64_t credential_ttl_s = 3600;  // agent credential lifetime
  std::int64_t bootstrap_ttl_s = 86400;  // one-time bootstrap token lifetime
  std::int64_t long_poll_max_ms = 10000;
  std::int64_t sync_interval_ms = 2000;
  std::int64_t log_chunk_max_bytes = 1 << 20;
  std::int64_t max_tasks_per_pipeline = 1000;
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
  // The scheduler's knobs (sched::SchedulerConfig, which documents them).
  bool fair_share = true;          // order within a group by dominant share after priority
  int reservations_per_group = 1;  // blocked tasks per group that hold what they wait for; 0: none
  int max_victims = 64;            // the most victims one preemption may pick
};

// Figures for /metrics, computed from the store.
struct MetricsSnapshot {
  std::map<std::string, std::int64_t> queued_by_group;  // resource group -> queued tasks
  std::map<std::string, std::int64_t> tasks_by_state;
  // (resource group, resource) -> (used, guaranteed limit)
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> quota;
  std::map<std::string, std::string> cluster_states;  // cluster -> state
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
  Result<std::vector<Node>> list_nodes(const Principal& p, const std::string& cluster_id);
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
  // Returns {"pipeline": ..., "tasks": [{id, name, state}]}.
  Result<json::object> submit_pipeline(const Principal& p, const json::value& doc);
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
  Result<json::array> usage(const Principal& p, Millis from, Millis to, const std::vector<std::string>& group_by);

  // --------------------------------------------------------------- agents
  // With a bootstrap token: exchanges it (one-time). With an empty bootstrap
  // token and `bearer` = the current credential: renews it.
  Result<RegisterResponse> agent_register(const RegisterRequest& req, std::string_view bearer);
  Result<SyncResponse> agent_sync(const Principal& agent, const SyncRequest& req);
  // Orders for a cluster right now, given the attempts its agent reported
  // (used to end a long-poll early). Empty when there is nothing to say.
  Result<SyncResponse> pending_orders(const std::string& cluster_id, const std::vector<AttemptReport>& reported);
  Status agent_logs(const Principal& agent, const LogUpload& upload);
  // Notified when there is new work for the cluster (start or stop).
  Signal& cluster_signal(const std::string& cluster_id);
  // Notified when any log arrives or any attempt ends (log followers).
  Signal& log_signal() { return log_signal_; }

  // ------------------------------------------------------------ the loop
  // One scheduling cycle: snapshot -> decide -> apply in one transaction.
  Status schedule_once();
  // Marks silent clusters offline and their attempts Lost; expires credentials.
  Status check_liveness();
  // One retention pass (see ServerConfig); what it removed. `more` when a
  // kind filled its batch, so the next pass should follow soon.
  struct RetentionPass {
    std::int64_t tmp_objects = 0, log_objects = 0, events = 0, tasks = 0;
    bool more = false;
  };
  Result<RetentionPass> run_retention();
  // Runs schedule_once and check_liveness on a thread, woken by submissions
  // and syncs (and at least every `idle_ms`).
  void start_background(std::int64_t idle_ms = 1000);
  void stop_background();
  void wake_scheduler();

  Result<MetricsSnapshot> metrics();
  bool store_healthy();

 private:
  Store& store_;
  ObjectStore& objects_;
  const Clock& clock_;
  ServerConfig config_;

  std::mutex signals_mu_;
  std::map<std::string, std::unique_ptr<Signal>> cluster_signals_;
  Signal log_signal_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool loop_wake_ = false;
  std::atomic<bool> loop_stop_{false};
  std::thread loop_;
  std::thread retention_;
  std::condition_variable retention_cv_;  // with loop_mu_: wakes the retention thread to stop
  // Serializes scheduling cycles (the background loop and tests).
  std::mutex schedule_mu_;
};

}  // namespace cp
