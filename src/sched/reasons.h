// Stage 5, explanation: the PendingReasons a task is left with, each with an
// English and a Chinese sentence that carry the figures, and the same figures
// as details for the API and UI. All wording lives here.
//
// The kinds a big cycle makes by the thousand (quota, no node, reservation,
// fallback shapes, preemption grace, preempt later) are kept as their
// figures (a `...Figures` struct, or QuotaRefusal) in a FiguredReason
// (scheduler.h) and worded by word(figures) when first read; the rest are
// worded when made.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/feasible.h"

namespace cp::sched::reasons {

// "waiting for 2 upstream tasks: prepare, fetch"; details {tasks}.
PendingReason dependencies(const std::vector<std::string>& task_ids);

// details {resource_group}.
PendingReason unknown_group(std::string_view group);

// The figures of a quota refusal: `Text` and `Amounts` are views of strings
// and lists the caller keeps while the reason is worded (QuotaFigures, built
// for every quota refusal a cycle explains: no copies), or owned where the
// refusal is kept to be worded when read (QuotaRefusal).
using NamedAmounts = std::vector<std::pair<std::string_view, std::int64_t>>;
using NamedAmountsView = std::span<const std::pair<std::string_view, std::int64_t>>;
template <class Text, class AmountList>
struct BasicQuotaFigures {
  using Amounts = AmountList;
  Text resource_group;
  Text resource;
  std::int64_t used = 0;
  std::int64_t requested = 0;
  std::int64_t guaranteed = 0;
  std::int64_t limit = 0;  // what the group could reach now (guarantee, or with borrowing)
  // Who holds it: project groups of this resource group, largest first.
  Amounts holders;
  // Set when the group may borrow from a cohort (its max is above its guarantee).
  Text cohort;
  std::int64_t ceiling = 0;
  std::int64_t cohort_idle = 0;
  bool may_borrow = true;  // false: the task's priority class is not preemptible
  // Groups of the cohort holding above their guarantee, largest first.
  Amounts borrowers;
  bool operator==(const BasicQuotaFigures&) const = default;  // owned figures only
};
using QuotaFigures = BasicQuotaFigures<std::string_view, NamedAmountsView>;
using QuotaRefusal = BasicQuotaFigures<std::string, std::vector<std::pair<std::string, std::int64_t>>>;
PendingReason word(const QuotaRefusal& f);  // reasons::quota of its figures
std::string_view code_of(const QuotaRefusal& f);

// A quota refusal kept as its figures, worded as quota(f) when first read.
Reasons::Shared quota_refusal(const QuotaFigures& f);
// The resource a quota refusal names (details.resource), without wording it.
std::string_view quota_resource(const Reason& refusal);

// "quota: gpu/nvidia-a100-80gb 8 of 8 in use by rg-proj-b (proj-b 6, proj-x 2),
// this task asks for 2; cohort gpu-shared has 0 idle (rg-c borrows 4)";
// details {resource, used, requested, limit, guaranteed, resource_group,
// holders, and with a cohort: cohort, ceiling, cohort_idle, may_borrow, borrowers}.
PendingReason quota(const QuotaFigures& f);

// "cluster c1 offline: credential_expired (...)"; details {cluster, state,
// state_reason, state_message}. `cluster` null: named by the group, never registered.
PendingReason cluster_offline(std::string_view id, const Cluster* cluster);

// The pinned cluster is not one of the group's; details {cluster, resource_group, clusters}.
PendingReason pinned_outside_group(std::string_view pinned, std::string_view group,
                                   const std::vector<std::string>& group_clusters);

// Every cluster of the group dropped by the pin or the cluster selector;
// details {resource_group, clusters_total, not_pinned, selector_mismatch, offline}.
PendingReason no_cluster(std::string_view group, std::string_view pinned, const Labels& selector,
                         const ClusterCounts& counts);

// The task is bound to a storage pool. `usable` = 0: "storage pool p1 has no
// cluster online: 2 of the pool offline (a, b); 1 cluster in other pools not
// considered (c)", the reason it waits; else a note that other pools were not
// considered. details {storage_pool, resource_group, clusters_excluded,
// excluded, pool_clusters, pool_offline, usable, clusters_total, not_pinned,
// selector_mismatch}.
PendingReason storage_pool(const PoolFilter& pool, std::string_view group, const ClusterCounts& counts,
                           std::int64_t usable);

// The figures of a task short of nodes, kept (worded when first read).
struct NoNodeFigures {
  NodeCounts counts;
  int replicas = 1;
  std::int64_t gpus = 0;  // per replica
  bool any_gpu = false;
  std::string gpu_type;
  std::string node_selector;  // the group's, as text; only when a node failed on it
  std::vector<std::string> clusters;
  bool operator==(const NoNodeFigures&) const = default;
};
// "no node fits: 12 nodes; 3 in maintenance, 9 lack gpu-type=nvidia-a100-80gb";
// details {nodes_total, <one key per NodeMisfit>, nodes_fit, replicas, clusters}.
PendingReason word(const NoNodeFigures& f);
std::string_view code_of(const NoNodeFigures& f);
// The same kept as figures, worded when first read.
Reasons::Shared no_node(const NodeCounts& counts, const Request& request, const ResourceGroup& group,
                        const std::vector<std::string>& clusters);

// Victims were told to stop for this task; details {victims: [{attempt, task,
// kind}], grace_s}.
struct VictimFigure {
  std::string attempt_id;
  std::string task_id;
  std::string kind;  // reclaim | priority
  bool operator==(const VictimFigure&) const = default;
};
// Kept as the victims, worded when first read.
struct GraceFigures {
  std::vector<VictimFigure> victims;
  bool already_stopping = false;
  bool operator==(const GraceFigures&) const = default;
};
PendingReason word(const GraceFigures& f);
std::string_view code_of(const GraceFigures& f);
Reasons::Shared preemption_grace(std::vector<VictimFigure> victims, bool already_stopping);

// It would fit but for room held for earlier blocked tasks; details {held_for}.
// Kept as the holders' ids, worded when first read.
struct ReservationFigures {
  std::vector<std::string> held_for;
  bool operator==(const ReservationFigures&) const = default;
};
PendingReason word(const ReservationFigures& f);
std::string_view code_of(const ReservationFigures& f);
Reasons::Shared reservation(std::vector<std::string> held_for);

// The task may preempt but not yet: details {priority_class, preempt_after_s,
// may_preempt_at (RFC 3339)}. Kept as these figures, worded when first read.
// Worded with the moment, not the time to go: nothing in it moves while the
// task waits, so a waiting task's stored reasons are not written again at
// every cycle (the time to go is read off the moment).
struct PreemptLaterFigures {
  std::string priority_class;
  std::int64_t preempt_after_s = 0;
  Millis queued_at = 0;
  bool operator==(const PreemptLaterFigures&) const = default;
};
PendingReason word(const PreemptLaterFigures& f);
std::string_view code_of(const PreemptLaterFigures& f);
Reasons::Shared preempt_later(std::string_view priority_class, std::int64_t preempt_after_s, Millis queued_at);

// Tried fallback shapes too; details {shapes: [{shape, after_s, opens_at,
// tried, resources}]}. Kept as the step's fallback shapes, when the task was
// queued and which shapes are open after `waited_ms` (shape_open), worded
// when first read; with the moment each opens, as above.
struct FallbackFigures {
  std::vector<StepShape> shapes;
  Millis queued_at = 0;
  std::vector<char> tried;  // per shape
  bool operator==(const FallbackFigures&) const = default;
};
PendingReason word(const FallbackFigures& f);
std::string_view code_of(const FallbackFigures& f);
Reasons::Shared fallbacks(const Task& task, Millis waited_ms);

// A reason met by fallback shape `shape`: the message says so, details.shape = shape.
PendingReason for_shape(PendingReason reason, int shape);

// First in line: room is held for it (on `nodes`, "cluster/node", or in its
// group's quota when `nodes` is empty); details {nodes, resource_group}.
PendingReason reserved(const std::vector<std::string>& nodes, std::string_view group);

// Request validation failed (Error from request_of()).
PendingReason invalid_request(const Error& error);

}  // namespace cp::sched::reasons
