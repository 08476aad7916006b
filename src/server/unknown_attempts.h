// The live attempts of a cluster whose agent fell silent (DESIGN.md "Fencing
// and outages"). Past lost_after_s without a sync (check_liveness) the
// cluster is offline; what becomes of its attempts depends on who supervises
// their jobs:
//
//   local: the agent's shims, which stop the task once the agent's lease ran out
//     attempt Lost, task requeued in the cluster's storage pool      end_lost
//   slurm, kubernetes: slurmd or the kubelet, which a dead agent cannot reach
//     attempt Unknown, the task keeps it (reason attempt_unknown)    mark_unknown
//       agent reports it live again   -> what it was before          resume_unknown
//       agent reports its end         -> recorded as any end (agents.cpp, finish_attempt)
//       agent does not mention it     -> stays Unknown (it may have lost its journal)
//       a platform admin confirms it is gone (ControlPlane::confirm_lost) -> end_lost
//
// An Unknown attempt is live work: it holds its quota and node room, is never
// chosen as a preemption victim, and its task gets no other attempt.
#pragma once

#include <string>

#include "common/result.h"
#include "model/types.h"
#include "store/store.h"

namespace cp::internal {

// Whether a silent cluster's attempts may be declared Lost and rerun at once:
// only where the agent's own supervisors stop them when its lease runs out.
bool fenced_by_agent(ExecutorKind executor);

// Ends `a` Lost on cluster `c` and requeues its task, bound to c's storage
// pool (a task bound before keeps its pool: its checkpoints are there); a
// task asked to cancel ends Cancelled instead. Writes the attempt, its end
// (record_attempt_end) and the task in `tx`. Whether the task was requeued.
Result<bool> end_lost(Tx& tx, Attempt& a, const Cluster& c, Millis now, const std::string& actor,
                      const std::string& message);

// Marks `a`, an attempt of silent cluster `c`, Unknown; its task keeps it,
// with the reason attempt_unknown. stop_reason and started_at stay as they
// were: resume_unknown reads them.
Status mark_unknown(Tx& tx, Attempt& a, const Cluster& c, Millis now);

// An Unknown attempt its agent reports live again: back to what it was
// (Stopping when it had been told to stop, Running once started, else
// Dispatched), its task's attempt_unknown reason gone. Writes the task and
// the attempt's event; the caller writes the attempt.
Status resume_unknown(Tx& tx, Attempt& a, Millis now, const std::string& actor);

// How an operator checks that a cluster's jobs are gone, e.g. "squeue" (for
// the alert and the hints).
std::string job_check(ExecutorKind executor);

}  // namespace cp::internal
