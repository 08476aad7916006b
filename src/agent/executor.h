// Executor: what the agent drives to run attempts on one execution cluster.
// One implementation per engine (executors/local today; Slurm and Kubernetes
// later), all behind this interface and held to one conformance suite.
//
// The agent calls it from one thread at a time; an implementation may still
// lock inside (the local one does) so that tests can look at it concurrently.
//
// Contract, engine-neutral:
//   - start() is idempotent: an attempt the executor runs or ran (and has not
//     yet forgotten) is not started again.
//   - poll() reports every attempt it knows, terminal ones included, until
//     forget(); an executor that restarts finds its attempts again (from its
//     own journal or from the engine) and reports them.
//   - stop() asks an attempt to end: a polite signal first, a hard kill
//     after grace_s; the final state follows the reason (see reason_state()).
//   - logs are offset based: read_new_logs() returns bytes from the last
//     offset confirmed with logs_shipped(), so a piece that was lost in
//     transit is simply read again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/protocol.h"

namespace cp {

// New bytes of one replica's log.
struct LogPiece {
  std::string attempt_id;
  std::string task_id;
  std::int64_t epoch = 0;
  int replica = 0;
  std::int64_t offset = 0;  // byte offset of `data` in the replica's log
  std::string data;
  // The replica has ended and `data` reaches the end of its log: nothing will
  // follow, so an incomplete UTF-8 sequence at the end is final too.
  bool final = false;
};

// Stop reasons of the protocol (StopOrder::reason).
inline constexpr std::string_view kStopCancel = "cancel";
inline constexpr std::string_view kStopPreempt = "preempt";
inline constexpr std::string_view kStopSuperseded = "superseded";
inline constexpr std::string_view kStopLost = "lost";  // also: the agent fenced itself

// The terminal state of an attempt that was stopped for `reason`, whatever
// its processes' exit codes were:
//   cancel -> Cancelled, preempt -> Preempted, lost -> Lost,
//   superseded -> Cancelled (the server has already replaced the attempt and
//   refuses its reports; Cancelled says "ended on request" without claiming a
//   loss the server did not see), anything else -> Cancelled.
AttemptState reason_state(std::string_view reason);

class Executor {
 public:
  virtual ~Executor() = default;

  // "local", "slurm", "kubernetes".
  virtual std::string kind() const = 0;

  // The nodes of this cluster as the engine sees them now. May be slow-ish
  // (probes hardware); the agent caches it.
  virtual std::vector<NodeReport> inventory() = 0;

  // Health of the engine itself (e.g. slurmctld reachable).
  virtual EngineStatus engine() = 0;

  // Starts every replica of the order. Idempotent. An error means the order
  // could not even be recorded (e.g. an id unusable as a file name); anything
  // later (command not found, fork failed) is reported as a Failed attempt.
  virtual Status start(const StartOrder& order) = 0;
  // The orders of one sync, one status each (in order). Engines that can
  // overlap the starts override it; by default one start after another.
  virtual std::vector<Status> start_all(const std::vector<StartOrder>& orders) {
    std::vector<Status> out;
    out.reserve(orders.size());
    for (const auto& o : orders) out.push_back(start(o));
    return out;
  }

  // Descriptors that become readable when a running replica's process ends
  // (pidfds), so that the agent reports an exit at once instead of at its
  // next check; valid until the next call. None by default.
  virtual std::vector<int> exit_fds() { return {}; }

  // Asks the attempt to end. Unknown or already ended attempts: no-op. A
  // second stop keeps the first reason and the earlier kill deadline.
  virtual void stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) = 0;

  // Current state of every attempt not yet forgotten. Also the executor's
  // heartbeat: kill deadlines are enforced here, so call it often (the agent
  // does, every ~50 ms while it waits).
  virtual std::vector<AttemptReport> poll() = 0;

  // The server stored the terminal report: stop reporting the attempt and
  // drop its files once its logs are shipped. No-op unless terminal.
  virtual void forget(const std::string& attempt_id) = 0;

  // Up to max_bytes of new log bytes over all attempts, oldest offset first
  // per replica (forgotten attempts included while bytes remain).
  virtual std::vector<LogPiece> read_new_logs(std::size_t max_bytes) = 0;
  // The server stored the log of (attempt, replica) up to new_offset.
  virtual void logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) = 0;
  // The server refuses logs of this attempt (stale epoch): stop shipping them.
  virtual void logs_refused(const std::string& attempt_id) = 0;

  // The agent's lease (executors/shim.h: the file, and the chain of leases
  // now held). Called before any start and whenever a new chain begins.
  // Executors whose supervisors hold the lease's deadline (local) start
  // every attempt under the current chain and stop at once any running
  // attempt of an older one: its lease ran out before this chain began, so
  // the server may already run it elsewhere. Others ignore it.
  virtual void set_lease(const std::string& lease_path, const std::string& chain) {
    (void)lease_path;
    (void)chain;
  }
};

}  // namespace cp
