// LocalExecutor: runs each replica of an attempt as a process group on this
// machine, under a supervisor shim (supervised_process.h), and keeps a
// journal per attempt so that a restarted agent finds its work again.
//
// On disk, under data_dir:
//   attempts/<attempt_id>/journal.json   the order, per replica the shim pid,
//                                        its start time, the pgid, the outcome,
//                                        the log offset shipped (a record per line, appended)
//   attempts/<attempt_id>/r<k>.log       stdout+stderr of replica k
//   attempts/<attempt_id>/r<k>.exit      "exit N" | "signal N", written by the shim
//   attempts/<attempt_id>/work/          the command's working directory
//   checkpoints/<task_id>/               CUBEPLANE_CHECKPOINT_DIR, shared by every
//                                        attempt of the task (a resumed attempt sees
//                                        what the previous one saved); never removed here
//
// Destroying the executor leaves processes running; the next LocalExecutor on
// the same data_dir adopts them (a shim alive with the same start time), reads
// the exit file of those that ended meanwhile, and reports a replica with
// neither as Failed "lost: agent restarted and the process is gone".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/executor.h"
#include "agent/executors/supervised_process.h"
#include "common/clock.h"

namespace cp {

class Nvml;

struct DeclaredGpus {
  std::string type;  // e.g. "nvidia-a100-80gb"
  int count = 0;
  std::int64_t memory_bytes = 0;  // per device; 0 = unknown
};
BOOST_DESCRIBE_STRUCT(DeclaredGpus, (), (type, count, memory_bytes))

// A node this machine pretends to be (the demo fleet: two nodes with four
// A100s each, on one laptop). Every declared node runs its processes here.
struct DeclaredNode {
  std::string name;
  Labels labels;
  std::int64_t cpu_milli = 0;     // 0 = this machine's hardware threads
  std::int64_t memory_bytes = 0;  // 0 = this machine's memory
  DeclaredGpus gpus;
};
BOOST_DESCRIBE_STRUCT(DeclaredNode, (), (name, labels, cpu_milli, memory_bytes, gpus))

struct LocalExecutorConfig {
  std::string data_dir;                            // made absolute; created when missing
  std::vector<DeclaredNode> nodes;                 // empty: this machine as one node, GPUs from NVML
  std::string nvml_library = "libnvidia-ml.so.1";  // "" = do not probe GPUs
  std::size_t log_chunk_bytes = 256 * 1024;        // most bytes of one LogPiece
  // How often each running replica's use is sampled (CPU and resident memory
  // of its process group; its GPUs through NVML on a machine that has them);
  // 0 = never.
  std::int64_t use_sample_ms = 5000;
  // The supervisor shim program (supervised_process.h); "" = each shim is a
  // fork of this process, which is slower the bigger this process is.
  std::string shim_program = default_shim_program();
};

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(LocalExecutorConfig config, const Clock& clock = SystemClock::instance());
  ~LocalExecutor() override;  // processes keep running; see the header comment
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  std::string kind() const override { return "local"; }
  std::vector<NodeReport> inventory() override;
  EngineStatus engine() override;
  Status start(const StartOrder& order) override;
  std::vector<Status> start_all(const std::vector<StartOrder>& orders) override;
  std::vector<int> exit_fds() override;
  void stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) override;
  std::vector<AttemptReport> poll() override;
  void forget(const std::string& attempt_id) override;
  std::vector<LogPiece> read_new_logs(std::size_t max_bytes) override;
  void logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) override;
  void logs_refused(const std::string& attempt_id) override;
  void set_lease(const std::string& lease_path, const std::string& chain) override;

  // For tests and diagnostics.
  const std::string& data_dir() const { return config_.data_dir; }
  std::string attempt_dir(const std::string& attempt_id) const;
  // The command's process group of each replica (0 once unknown); waits
  // briefly for shims that have not reported theirs yet.
  std::vector<int> process_groups(const std::string& attempt_id);
  // What the attempt has used so far (reports carry it once it ended).
  ResourceUse use_so_far(const std::string& attempt_id);

  // One replica of an attempt as the journal keeps it.
  struct ReplicaRecord {
    int replica = 0;
    std::string node;
    int shim_pid = 0;  // 0: not spawned (yet)
    int pgid = 0;
    std::int64_t shim_start_ticks = 0;
    std::string outcome;            // "" while it runs; "exit N" | "signal N" | "lost" | "error: <why>"
    std::int64_t finished_seq = 0;  // order in which outcomes were seen: the first failure wins
    std::int64_t log_shipped = 0;
  };
  struct AttemptRecord {
    int version = 1;
    StartOrder order;
    Millis started_at = 0;
    std::string stop_reason;  // a stop order's reason; "" when none
    Millis kill_at = 0;       // SIGKILL deadline of a pending stop; 0 when none
    bool killed = false;
    bool gang_stop = false;  // a replica failed and its siblings are being stopped
    bool terminal = false;
    AttemptState state = AttemptState::Running;
    std::optional<int> exit_code;
    std::string message;
    Millis finished_at = 0;
    bool acked = false;         // the server stored the terminal report
    bool logs_refused = false;  // the server refuses its logs (stale epoch)
    std::vector<ReplicaRecord> replicas;
    ResourceUse use;  // sampled while it ran
    std::string lease_chain;  // the agent's lease chain it runs under ("" = none: started before leases)
    std::string fence_note;   // why it was stopped for a lease that ran out; "" when it was not
  };

  // The latest whole record of an attempt's journal (journal.json, appended:
  // agent_files::append_record).
  static Result<AttemptRecord> read_journal(const std::string& path);

 private:
  struct Live {
    AttemptRecord rec;
    bool adopted = false;  // loaded from a journal, not started by this object
    std::map<int, std::int64_t> cpu_ticks;  // per replica pgid, at the last sample
    std::map<std::size_t, SpawnedProcess> reports;  // by replica index: shims released, pgid not yet taken
  };

  void load_journals();
  Status save(const Live& a);
  void refresh(Live& a);  // observe replicas, enforce deadlines, decide the final state
  void sample_use();      // every use_sample_ms: one sample of each running replica
  void signal_running(Live& a, int sig);
  // The pgid that replica's shim reported, waiting up to timeout_ms (0: only
  // if it is there); whether the record changed.
  bool take_pgid(Live& a, std::size_t replica, int timeout_ms);
  void drop_reports(Live& a);  // closes what is left of them
  std::vector<std::string> build_env(const StartOrder& order, const ReplicaPlacement& placement) const;
  // A start order recorded and journaled; nullptr when it is known already.
  Result<Live*> record_start(const StartOrder& order);
  // The replicas' shims forked (gated) and journaled; nullopt where the fork failed.
  std::vector<std::optional<SpawnedProcess>> spawn_shims(Live& a);
  AttemptReport report_of(const AttemptRecord& r) const;
  void maybe_remove(const std::string& attempt_id);
  std::string log_path(const std::string& attempt_id, int replica) const;
  std::string exit_path(const std::string& attempt_id, int replica) const;

  LocalExecutorConfig config_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Live> attempts_;
  // pidfds of running replicas' shims, by (attempt, replica index); closed
  // by exit_fds() once the replica ended, so that none closes mid-request.
  std::map<std::pair<std::string, std::size_t>, int> exit_fds_;
  void watch_exit(const std::string& attempt_id, std::size_t replica, int shim_pid);
  std::set<std::string> forgotten_;  // removed this process; a late start order for them is ignored
  std::int64_t finish_counter_ = 0;
  std::unique_ptr<Nvml> nvml_;  // lazily, on the first inventory()
  bool nvml_probed_ = false;
  HostFacts facts_;
  std::string engine_problem_;  // "" when healthy
  std::int64_t last_sample_ns_ = 0;  // steady clock; 0 = none yet
  std::string lease_path_;   // the agent's lease file; "" until set_lease (no deadline)
  std::string lease_chain_;  // the chain new attempts start under
};

BOOST_DESCRIBE_STRUCT(LocalExecutor::ReplicaRecord, (),
                      (replica, node, shim_pid, pgid, shim_start_ticks, outcome, finished_seq, log_shipped))
BOOST_DESCRIBE_STRUCT(LocalExecutor::AttemptRecord, (),
                      (version, order, started_at, stop_reason, kill_at, killed, gang_stop, terminal, state, exit_code,
                       message, finished_at, acked, logs_refused, replicas, use, lease_chain, fence_note))

}  // namespace cp
