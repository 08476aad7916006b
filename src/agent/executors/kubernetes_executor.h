// KubernetesExecutor: runs each replica of an attempt as a batch/v1 Job (one
// pod, backoffLimit 0, restartPolicy Never) pinned to the node the scheduler
// placed it on, and follows the pods through a list + watch of the API.
//
//   start   POST the Jobs (409 AlreadyExists = started before: idempotent);
//           journal first, as the local executor does
//   watch   a background thread: list pods (managed-by=cubeplane), remember the
//           resourceVersion, watch from it (bookmarks on); 410 Gone or a
//           dropped watch -> list again
//   poll    pod phase and container state -> AttemptReport (gang: the first
//           failure fails the attempt and deletes the sibling Jobs)
//   stop    DELETE the Jobs, propagationPolicy Foreground, gracePeriodSeconds
//           = grace: the kubelet sends SIGTERM, waits, sends SIGKILL
//   logs    GET pods/<pod>/log?limitBytes=<shipped + chunk>, sliced at the
//           shipped offset (offsets as in the local executor)
//
// On disk, under data_dir: attempts/<attempt_id>/journal.json (the order, per
// replica its Job, pod, outcome and log offset shipped), kube/ (credentials
// written from a kubeconfig's *-data fields).
//
// A 401/403 (or an unreachable API) while creating leaves the attempt
// unstarted: start() records nothing and returns ok, engine() names the
// problem in the API's own words, and the server's next sync repeats the
// order. Only an answer that the order itself is bad (422, 400) fails it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/executor.h"
#include "agent/executors/kube_client.h"
#include "common/clock.h"

namespace cp {

struct KubeToleration {
  std::string key;
  std::string op = "Equal";  // Equal | Exists ("operator" in the API)
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute | "" (all)
  std::optional<std::int64_t> toleration_seconds;
};
BOOST_DESCRIBE_STRUCT(KubeToleration, (), (key, op, value, effect, toleration_seconds))

struct KubernetesExecutorConfig {
  std::string kube_namespace = "default";
  std::string data_dir;  // made absolute; created when missing
  std::string default_image;  // for orders without an image; "" = such orders fail
  // The Kubernetes PriorityClass of every Job ("" = none). StartOrder does not
  // carry the task's Cubeplane priority class, so there is nothing to map yet.
  std::string priority_class_name;
  std::vector<KubeToleration> tolerations;
  std::string node_label = "kubernetes.io/hostname";  // pins a replica to its placed node
  std::string gpu_product_label = "nvidia.com/gpu.product";
  // Cubeplane GPU type -> the node label value it came from (types are the
  // label lowercased); filled by inventory(), or set here. Used to add the
  // GPU label to the nodeSelector.
  std::map<std::string, std::string> gpu_products;
  // node -> its MIG instance names (`nvidia-smi -L`, e.g. "MIG-<uuid>"): a MIG
  // replica gets NVIDIA_VISIBLE_DEVICES from them, by its gpu_indices.
  std::map<std::string, std::vector<std::string>> mig_instances;
  // PersistentVolumeClaim mounted at /cubeplane/checkpoints (subPath
  // <task_id>): CUBEPLANE_CHECKPOINT_DIR survives the pod, so a resumed
  // attempt finds what the last one saved. "" = no checkpoint volume.
  std::string checkpoint_pvc;
  std::int64_t ttl_seconds_after_finished = 86400;
  std::size_t log_chunk_bytes = 256 * 1024;  // most bytes of one LogPiece
  // After a stop's grace has passed, how long to wait for the pods to go
  // before calling them gone (a node that is down never confirms).
  std::int64_t stop_slack_s = 60;
  long watch_timeout_s = 300;  // the server ends a watch after this; it is simply resumed
  long relist_backoff_ms = 1000;
};

// The batch/v1 Job of one replica (pure: no I/O).
Result<json::value> job_manifest(const StartOrder& order, int replica, const KubernetesExecutorConfig& config);
// "cp-<attempt id, lowercased, '.' -> '-'>-r<replica>", at most 63 characters
// (shortened with a hash of the whole id when longer).
std::string job_name(const std::string& attempt_id, int replica);

class KubernetesExecutor final : public Executor {
 public:
  KubernetesExecutor(KubernetesExecutorConfig config, KubeConfig kube, const Clock& clock = SystemClock::instance());
  ~KubernetesExecutor() override;  // Jobs keep running; the next executor on data_dir adopts them
  KubernetesExecutor(const KubernetesExecutor&) = delete;
  KubernetesExecutor& operator=(const KubernetesExecutor&) = delete;

  std::string kind() const override { return "kubernetes"; }
  std::vector<NodeReport> inventory() override;
  EngineStatus engine() override;
  Status start(const StartOrder& order) override;
  void stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) override;
  std::vector<AttemptReport> poll() override;
  void forget(const std::string& attempt_id) override;
  std::vector<LogPiece> read_new_logs(std::size_t max_bytes) override;
  void logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) override;
  void logs_refused(const std::string& attempt_id) override;

  // For tests: how many times the pod list was (re)read.
  int lists() const;

  struct ReplicaRecord {
    int replica = 0;
    std::string node;
    std::string job;
    bool created = false;
    std::string pod;                // the pod last seen for it; "" before
    std::string outcome;            // "" while it runs; "exit N" | "gone" | "error: <why>"
    std::string detail;             // e.g. "OOMKilled"
    std::int64_t finished_seq = 0;  // order in which outcomes were seen: the first failure wins
    bool deleted = false;           // its Job was deleted (stop, gang)
    std::int64_t log_shipped = 0;
    std::int64_t log_end = -1;  // the whole log's size once known to be final
  };
  struct AttemptRecord {
    int version = 1;
    StartOrder order;
    Millis started_at = 0;
    std::string stop_reason;
    std::int64_t stop_grace_s = -1;  // grace of the DELETE sent; -1 none
    Millis kill_at = 0;              // grace deadline of a pending stop; 0 none
    bool gang_stop = false;
    bool terminal = false;
    AttemptState state = AttemptState::Running;
    std::optional<int> exit_code;
    std::string message;  // terminal: why; running: what the pods wait for
    Millis finished_at = 0;
    bool acked = false;
    bool logs_refused = false;
    std::vector<ReplicaRecord> replicas;
  };

 private:
  struct PodView {
    std::string name;
    std::string attempt;
    int replica = -1;
    std::string phase;
    std::optional<int> exit_code;
    std::string reason;   // terminated or waiting reason
    std::string message;  // waiting message / pod message
    bool deleted = false;  // a DELETED event, or missing from a relist: the last state seen
  };

  void load_journals();
  Status save(const AttemptRecord& a);
  void refresh(AttemptRecord& a);
  void delete_jobs(AttemptRecord& a, std::int64_t grace_s);
  void resolve_pod(const std::string& attempt_id, ReplicaRecord& r) const;  // from the watch, when not known yet
  AttemptReport report_of(const AttemptRecord& a) const;
  void maybe_remove(const std::string& attempt_id);
  void note_error(const std::string& op, const Error& e);
  void note_ok(const std::string& op);
  std::string dir_of(const std::string& attempt_id) const;

  void watch_loop();
  bool relist(KubeClient& client, std::string& rv);
  enum class WatchEnd { kResume, kRelist, kRelistLater };
  WatchEnd watch_once(KubeClient& client, std::string& rv);
  void apply_pod(const json::value& pod, bool deleted);
  void wait_backoff();

  KubernetesExecutorConfig config_;
  const Clock& clock_;
  KubeConfig kube_;
  KubeClient api_;  // calls made under mu_ (start, stop, poll, logs, inventory)

  mutable std::mutex mu_;
  std::map<std::string, AttemptRecord> attempts_;
  std::set<std::string> forgotten_;
  std::int64_t finish_counter_ = 0;
  std::map<std::string, Error> problems_;  // by operation ("create jobs", ...): the last error, until one succeeds
  std::vector<NodeReport> last_nodes_;

  // Pods as the watch sees them, by name; `synced` once a list succeeded.
  // Only pods of attempts this executor knows are kept.
  std::map<std::string, PodView> pods_;
  bool synced_ = false;
  int lists_ = 0;

  Millis next_create_at_ = 0;  // after a failed create, retried from then on
  Millis next_delete_at_ = 0;  // likewise for a failed delete
  std::atomic<bool> stopping_{false};
  std::condition_variable cv_;
  std::thread watcher_;
};

BOOST_DESCRIBE_STRUCT(KubernetesExecutor::ReplicaRecord, (),
                      (replica, node, job, created, pod, outcome, detail, finished_seq, deleted, log_shipped, log_end))
BOOST_DESCRIBE_STRUCT(KubernetesExecutor::AttemptRecord, (),
                      (version, order, started_at, stop_reason, stop_grace_s, kill_at, gang_stop, terminal, state,
                       exit_code, message, finished_at, acked, logs_refused, replicas))

}  // namespace cp
