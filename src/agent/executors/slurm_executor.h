// SlurmExecutor: runs each replica of an attempt as one Slurm batch job,
// through the Slurm CLI (sbatch, squeue, scontrol, scancel) run as
// subprocesses, and keeps a journal per attempt so that a restarted agent
// finds its jobs again instead of submitting them twice.
//
// On disk, under data_dir (on a multi-node cluster the attempts/ and
// checkpoints/ trees must be on a filesystem the compute nodes share, at the
// same path: Slurm writes the logs there and the batch script the exit file):
//   attempts/<attempt_id>/journal.json   the order; per replica the job name and
//                                        id, its last Slurm state, the outcome, the
//                                        log offset shipped (written atomically,
//                                        before sbatch and after)
//   attempts/<attempt_id>/r<k>.sh        the batch script submitted
//   attempts/<attempt_id>/r<k>.log       stdout+stderr of replica k (sbatch --output)
//   attempts/<attempt_id>/r<k>.exit      "exit N", written by the batch script, so the
//                                        exit code survives slurmctld forgetting the job
//   attempts/<attempt_id>/work/          the command's working directory (--chdir)
//   checkpoints/<task_id>/               CUBEPLANE_CHECKPOINT_DIR, as the local executor
//
// Jobs are named cp_<attempt_id>_r<k>. A replica journaled without a job id
// (the agent died during sbatch, or sbatch could not reach slurmctld) is
// looked up by that name in squeue before it is ever submitted again.
//
// Reported states: Dispatched while every replica's job is still pending
// (queued in Slurm, nothing started), Running once one runs, Stopping while
// a stop is under way, then the terminal state (gang semantics as the local
// executor: the first failure fails the attempt and stops its siblings).
//
// Measured use stays empty: what a job used is Slurm's accounting
// (sacct/jobacct_gather), which a cluster may not run; reports say nothing
// rather than guess.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/executor.h"
#include "agent/executors/run_command.h"
#include "agent/executors/slurm_text.h"
#include "common/clock.h"

namespace cp {

struct SlurmExecutorConfig {
  std::string data_dir;   // made absolute; created when missing
  std::string partition;  // --partition of every job and the nodes reported; "" = Slurm's default, all nodes
  std::string bin_dir;    // where sbatch, squeue, scontrol, scancel are; "" = looked up in PATH
  std::string slurm_conf;  // SLURM_CONF for those commands; "" = inherited, else Slurm's default
  std::vector<std::string> sbatch_args;  // appended to every sbatch (e.g. --account=A, --qos=Q, --time=T)
  std::int64_t squeue_interval_ms = 500;  // squeue at most this often (poll() comes every ~50 ms)
  std::int64_t command_timeout_ms = 15000;  // a Slurm command that hangs longer is killed
  std::size_t log_chunk_bytes = 256 * 1024;  // most bytes of one LogPiece
};

class SlurmExecutor final : public Executor {
 public:
  explicit SlurmExecutor(SlurmExecutorConfig config, const Clock& clock = SystemClock::instance());
  ~SlurmExecutor() override;  // jobs keep running; the next executor on data_dir adopts them
  SlurmExecutor(const SlurmExecutor&) = delete;
  SlurmExecutor& operator=(const SlurmExecutor&) = delete;

  std::string kind() const override { return "slurm"; }
  std::vector<NodeReport> inventory() override;
  EngineStatus engine() override;
  Status start(const StartOrder& order) override;
  void stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) override;
  std::vector<AttemptReport> poll() override;
  void forget(const std::string& attempt_id) override;
  std::vector<LogPiece> read_new_logs(std::size_t max_bytes) override;
  void logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) override;
  void logs_refused(const std::string& attempt_id) override;

  // For tests and diagnostics.
  const std::string& data_dir() const { return config_.data_dir; }
  std::string attempt_dir(const std::string& attempt_id) const;
  // The Slurm job id of each replica ("" while unknown).
  std::vector<std::string> job_ids(const std::string& attempt_id);
  // How many times sbatch was run by this object.
  int submissions() const { return submissions_; }

  struct ReplicaRecord {
    int replica = 0;
    std::string node;
    std::string job_name;
    std::string job_id;       // "" until sbatch answered (or squeue showed it by name)
    std::string slurm_state;  // last seen in squeue: PENDING, RUNNING, ...
    bool started = false;     // seen running (or ended after running)
    bool term_sent = false;   // the polite signal of a stop went out
    std::string outcome;  // "" while it runs; "exit N" | "signal N" | "slurm <STATE>" | "lost" | "error: <why>" | "unsubmitted"
    std::int64_t finished_seq = 0;  // order in which outcomes were seen: the first failure wins
    std::int64_t log_shipped = 0;
  };
  struct AttemptRecord {
    int version = 1;
    StartOrder order;
    Millis submitted_at = 0;
    Millis started_at = 0;  // the first replica seen running; 0 while all are pending
    std::string stop_reason;
    Millis kill_at = 0;
    bool killed = false;
    bool gang_stop = false;
    bool terminal = false;
    AttemptState state = AttemptState::Dispatched;
    std::optional<int> exit_code;
    std::string message;
    Millis finished_at = 0;
    bool acked = false;
    bool logs_refused = false;
    std::vector<ReplicaRecord> replicas;
  };

 private:
  struct Live {
    AttemptRecord rec;
    bool adopted = false;
    // Per replica: when (steady ns) its job id became known; a squeue taken
    // earlier cannot prove the job gone.
    std::map<int, std::int64_t> known_since_ns;
    // Per replica: when its job was first seen ended without an exit file.
    std::map<int, std::int64_t> ended_seen_ns;
    // The snapshot on which the polite part of a stop was last applied.
    std::int64_t stop_snapshot_ns = -1;
  };
  // One squeue of this user's jobs.
  struct Snapshot {
    bool ok = false;
    std::int64_t taken_ns = 0;  // when the squeue started (steady)
    std::map<std::string, slurm::JobRow> by_id;
    std::multimap<std::string, slurm::JobRow> by_name;
  };

  std::string bin(const std::string& name) const;
  CommandOutput run(std::vector<std::string> argv, std::string* spawn_error = nullptr) const;
  void refresh_snapshot(bool force);
  void load_journals();
  Status save(const Live& a);
  void refresh(Live& a);
  void submit(Live& a, ReplicaRecord& r);
  std::string finished_outcome(const Live& a, const ReplicaRecord& r);
  void stop_politely(Live& a);
  void kill_hard(Live& a);
  std::vector<std::pair<std::string, std::string>> build_env(const StartOrder& order,
                                                             const ReplicaPlacement& placement) const;
  AttemptReport report_of(const AttemptRecord& r) const;
  void maybe_remove(const std::string& attempt_id);
  std::string log_path(const std::string& attempt_id, int replica) const;
  std::string exit_path(const std::string& attempt_id, int replica) const;
  std::string script_path(const std::string& attempt_id, int replica) const;

  SlurmExecutorConfig config_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Live> attempts_;
  std::set<std::string> forgotten_;
  std::int64_t finish_counter_ = 0;
  Snapshot snapshot_;
  std::int64_t last_squeue_ns_ = 0;  // steady; 0 = never
  std::string squeue_problem_;       // "" when the last squeue worked
  std::string setup_problem_;        // data dir not usable
  std::vector<NodeReport> last_inventory_;  // given again while scontrol fails
  int submissions_ = 0;
};

BOOST_DESCRIBE_STRUCT(SlurmExecutor::ReplicaRecord, (),
                      (replica, node, job_name, job_id, slurm_state, started, term_sent, outcome, finished_seq,
                       log_shipped))
BOOST_DESCRIBE_STRUCT(SlurmExecutor::AttemptRecord, (),
                      (version, order, submitted_at, started_at, stop_reason, kill_at, killed, gang_stop, terminal,
                       state, exit_code, message, finished_at, acked, logs_refused, replicas))

}  // namespace cp
