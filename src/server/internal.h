// Helpers shared by the control plane's translation units; not part of its API.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "model/types.h"
#include "server/control_plane.h"
#include "store/store.h"

namespace cp::internal {

Event make_event(Millis at, std::string actor, std::string object_kind, std::string object_id, std::string type,
                 std::string from = "", std::string to = "", std::string message = "", json::object data = {});

// Moves a task to `to` (CHECKs the lifecycle), stamps times, writes it and
// its event in `tx`. The caller owns the transaction.
Status transition(Tx& tx, Task& task, TaskState to, Millis now, const std::string& actor,
                  const std::string& message = "", json::object data = {});

// Cancels every live task of the pipeline that (transitively) depends on `failed`.
Status cancel_dependents(Tx& tx, const Task& failed, Millis now, const std::string& actor);

// The replicas of an attempt: one per placement (at least one).
// Attempt::resources is per replica.
std::int64_t attempt_replicas(const Attempt& a);
// Resources held by an attempt (per replica x replicas).
Resources attempt_total(const Attempt& a);
// What the live attempts hold, by the resource group of their task.
Result<std::map<std::string, Resources>> used_by_resource_group(Tx& tx);

// The usage ledger's rows for an attempt that has ended: one per UTC day of
// [started_at, finished_at), charged to the task's groups and user, keyed by
// how the attempt ended. None for an attempt that never started.
std::vector<UsageRow> usage_of(const Task& task, const Attempt& a);
// Adds them to the ledger in `tx` (the transaction that ends the attempt, so
// that the ledger and the attempt agree after any crash).
Status record_usage(Tx& tx, const Task& task, const Attempt& a);

// The cluster history's rows (minute, hour and day) that `at` falls in, each
// holding what `fill` sets: the counters of something that happened then.
inline constexpr std::int64_t kHistoryWidths[] = {60, 3600, 86400};
std::vector<ClusterSample> history_rows(const std::string& cluster, Millis at,
                                        const std::function<void(ClusterSample&)>& fill);
// Binds the task to the storage pool of `cluster_id` (Task::storage_pool),
// once: a task already bound keeps its pool (its checkpoints are there, and
// a cluster's pool may have been renamed since). A cluster gone from the
// store binds nothing. Does not write the task; the caller does.
Status bind_storage_pool(Tx& tx, Task& task, const std::string& cluster_id);

// Everything an attempt's end writes besides the attempt and task: its
// "attempt.state" event (attempt_end_event), its usage (record_usage) and,
// for Succeeded, Failed and Lost, the cluster's finished/failed counters.
// In the transaction that ends it.
Status record_attempt_end(Tx& tx, const Task* task, const Attempt& a, Millis now, const std::string& actor,
                          const std::string& message);

// The event that says an attempt ended. Self-contained: its data holds what
// the attempt's ledger rows are made of ("usage": task, groups, user,
// cluster, start, end, resources per replica, replicas), so that the ledger
// can be rebuilt from events alone (ControlPlane::rebuild_usage).
Event attempt_end_event(Millis now, const std::string& actor, const Task* task, const Attempt& a,
                        const std::string& message);
// The task and attempt (the parts usage_of reads) that such an event
// describes; nullopt for an event without "usage" data.
std::optional<std::pair<Task, Attempt>> usage_source(const Event& e);

inline constexpr Millis kDayMs = 86'400'000;
inline Millis day_start(Millis t) { return t - ((t % kDayMs) + kDayMs) % kDayMs; }

// Why `p` may not submit into resource group `rg` of project group `pg`
// for want of an approval (pg lists rg with approval: required and no
// approval holds at `now`; platform admins need none); nullopt: it may.
Result<std::optional<Error>> approval_refusal(Tx& tx, const ProjectGroup& pg, const std::string& rg,
                                              const Principal& p, Millis now);

// A project group's monthly budget against this month's use (month_to_date)
// at `now`: per measure (gpu_hours; cost with a price table) used, budget,
// percent, projected (the month's end at the pace so far), exhausted or
// runs_out_at (at that pace, when it runs out within the month).
json::object budget_status(const Budget& budget, const MonthUse& use, Millis now);

// Whether a node as an agent reports it now (`reported`) says nothing the
// stored one does not: the same labels, resources, readiness, facts, GPUs
// (their live utilization and memory aside: server/live_inventory.h) and
// drift, and a clock offset within kClockSlackMs of the stored one (it
// moves with the network's jitter at every sync; crossing the preflight
// limit changes the drift, which is compared). What admins set on a node
// (overrides, maintenance) is not the agent's and is not compared.
inline constexpr Millis kClockSlackMs = 250;
bool same_report(const Node& stored, const Node& reported);

Error unknown_reference(const std::string& field, const std::string& kind, const std::string& name);
Error forbidden_for(const Principal& p, const std::string& what_en, const std::string& what_zh);

}  // namespace cp::internal
