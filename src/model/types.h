// The nouns of Cubeplane (DESIGN.md "Data model"). Plain structs, described
// with Boost.Describe so that common/json.h encodes and decodes them; the
// same JSON is the storage format of spec blobs and the REST representation.
// Times are Millis (ms since the Unix epoch, UTC); 0 means "not yet".
#pragma once

#include <boost/describe.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "model/resource_use.h"
#include "model/resources.h"

namespace cp {

using Labels = std::map<std::string, std::string>;

// ---------------------------------------------------------------- clusters

BOOST_DEFINE_ENUM_CLASS(ClusterState, online, degraded, offline, draining)
BOOST_DEFINE_ENUM_CLASS(ExecutorKind, local, slurm, kubernetes)

struct Cluster {
  std::string id;  // CLUSTER_ID, globally unique, a DNS-1123 label
  std::string display_name;
  ExecutorKind executor = ExecutorKind::local;
  std::string storage_pool = "default";
  // Where the storage pool is mounted on every node ("" = not checked); a
  // node without it is flagged by the preflight check.
  std::string storage_mount;
  Labels labels;
  ClusterState state = ClusterState::offline;
  // Why it is in that state: "never_connected", "unreachable",
  // "credential_expired", "engine_error", "admin_drain", "" when online.
  std::string state_reason = "never_connected";
  std::string state_message;
  Millis last_contact = 0;
  Millis credential_expires_at = 0;
  std::string agent_instance;  // the agent process that synced last
  std::int64_t agent_seq = 0;  // the highest sync seq applied from that instance
  std::string agent_version;
  Millis created_at = 0;
  Millis updated_at = 0;
};
BOOST_DESCRIBE_STRUCT(Cluster, (),
                      (id, display_name, executor, storage_pool, storage_mount, labels, state, state_reason,
                       state_message, last_contact, credential_expires_at, agent_instance, agent_seq, agent_version,
                       created_at, updated_at))

// ------------------------------------------------------------------- nodes

struct HostFacts {
  std::string os;
  std::string kernel;
  std::string runtime;
  std::string driver;
  std::string cuda;
  std::int64_t clock_offset_ms = 0;
  std::vector<std::string> mounts;  // mount points of real filesystems (not proc, sysfs, cgroup, ...)
};
BOOST_DESCRIBE_STRUCT(HostFacts, (), (os, kernel, runtime, driver, cuda, clock_offset_ms, mounts))

// A way a node differs from its cluster or from what it declares, found by
// the server's preflight check on every sync (server/preflight.h).
struct NodeDrift {
  std::string kind;  // kernel | runtime | driver | cuda | storage_mount | clock_offset | gpus
  std::string message;
  std::string message_zh;
};
BOOST_DESCRIBE_STRUCT(NodeDrift, (), (kind, message, message_zh))

struct GpuDevice {
  int index = 0;
  std::string uuid;
  std::string model;  // the gpu type, e.g. "nvidia-a100-80gb"
  std::int64_t memory_total = 0;  // bytes
  std::int64_t memory_used = 0;   // bytes
  int utilization = 0;            // percent, 0..100; -1: not measured (declared GPUs, no NVML)
};
BOOST_DESCRIBE_STRUCT(GpuDevice, (), (index, uuid, model, memory_total, memory_used, utilization))

// Node labels with meaning to the scheduler.
inline constexpr std::string_view kLabelGpuType = "gpu-type";
inline constexpr std::string_view kLabelGpuNodeGroup = "gpu-node-group";
inline constexpr std::string_view kLabelMaintenance = "maintenance";

struct Node {
  std::string cluster_id;
  std::string name;
  Labels labels;           // as reported by the agent
  Labels label_overrides;  // set by an admin; win over reported labels
  Resources capacity;
  Resources allocatable;
  bool ready = true;
  std::string not_ready_reason;
  bool maintenance = false;  // set by an admin (or the label maintenance=true)
  HostFacts facts;
  std::vector<GpuDevice> gpus;
  std::vector<NodeDrift> drift;  // empty: the node agrees with its cluster
  Millis updated_at = 0;

  // labels with overrides applied; an override of "" removes the label.
  Labels effective_labels() const;
  bool in_maintenance() const;
};
BOOST_DESCRIBE_STRUCT(Node, (),
                      (cluster_id, name, labels, label_overrides, capacity, allocatable, ready, not_ready_reason,
                       maintenance, facts, gpus, drift, updated_at))

// ---------------------------------------------------- groups and priorities

struct QuotaEntry {
  std::int64_t guaranteed = 0;
  std::optional<std::int64_t> max;  // borrowing ceiling; unset = guaranteed
};
BOOST_DESCRIBE_STRUCT(QuotaEntry, (), (guaranteed, max))

struct AlertPolicy {
  std::vector<int> thresholds{70, 85, 95};  // percent of guaranteed quota
  std::int64_t sustained_s = 300;
  std::string webhook;
};
BOOST_DESCRIBE_STRUCT(AlertPolicy, (), (thresholds, sustained_s, webhook))

BOOST_DEFINE_ENUM_CLASS(PlacementPolicy, binpack, spread)

struct ResourceGroup {
  std::string name;
  std::vector<std::string> clusters;
  Labels node_selector;
  std::map<std::string, QuotaEntry> quota;  // by resource name, amounts as in Resources
  std::string cohort;
  Labels required_labels;  // a pipeline must carry these labels to use the group
  PlacementPolicy placement = PlacementPolicy::binpack;
  AlertPolicy alerts;
  Resources default_request;  // applied when a step omits cpu/memory
  Resources max_per_task;     // empty = no per-task maximum
  Millis created_at = 0;
  Millis updated_at = 0;

  Resources guaranteed() const;
  Resources ceiling() const;  // max where set, else guaranteed
};
BOOST_DESCRIBE_STRUCT(ResourceGroup, (),
                      (name, clusters, node_selector, quota, cohort, required_labels, placement, alerts,
                       default_request, max_per_task, created_at, updated_at))

BOOST_DEFINE_ENUM_CLASS(ProjectRole, admin, member, viewer)

struct Member {
  std::string user;
  ProjectRole role = ProjectRole::member;
};
BOOST_DESCRIBE_STRUCT(Member, (), (user, role))

struct ResourceGroupGrant {
  std::string name;
  std::string approval = "none";  // "none" | "required"
};
BOOST_DESCRIBE_STRUCT(ResourceGroupGrant, (), (name, approval))

struct Budget {
  std::optional<std::int64_t> gpu_hours;
  std::optional<std::int64_t> cost_cents;
};
BOOST_DESCRIBE_STRUCT(Budget, (), (gpu_hours, cost_cents))

struct ProjectGroup {
  std::string name;
  std::vector<Member> members;
  std::string default_resource_group;
  std::vector<ResourceGroupGrant> resource_groups;  // besides the default
  Budget monthly_budget;
  Millis created_at = 0;
  Millis updated_at = 0;

  std::optional<ProjectRole> role_of(std::string_view user) const;
  // The default group or one listed (approval not considered here).
  bool allows_resource_group(std::string_view rg) const;
};
BOOST_DESCRIBE_STRUCT(ProjectGroup, (),
                      (name, members, default_resource_group, resource_groups, monthly_budget, created_at,
                       updated_at))

struct PriorityClass {
  std::string name;
  int value = 0;
  bool preemptible = true;  // may be preempted by others
  bool may_preempt = false;  // may preempt others ...
  std::int64_t preempt_after_s = 0;  // ... after waiting this long in the queue
  std::int64_t grace_s = 30;         // SIGTERM-to-SIGKILL grace when preempted or cancelled
  std::string description;
  Millis created_at = 0;
};
BOOST_DESCRIBE_STRUCT(PriorityClass, (),
                      (name, value, preemptible, may_preempt, preempt_after_s, grace_s, description, created_at))

// ------------------------------------------------------ users and tokens

BOOST_DEFINE_ENUM_CLASS(PlatformRole, admin, user, viewer)

struct User {
  std::string name;
  PlatformRole role = PlatformRole::user;
  Millis created_at = 0;
};
BOOST_DESCRIBE_STRUCT(User, (), (name, role, created_at))

struct ApiToken {
  std::string id;    // public handle, "tok-..."
  std::string hash;  // sha256 hex of the secret; the secret is never stored
  std::string user;
  std::string description;
  Millis created_at = 0;
  Millis expires_at = 0;  // 0 = never
};
BOOST_DESCRIBE_STRUCT(ApiToken, (), (id, hash, user, description, created_at, expires_at))

// ------------------------------------------------ pipelines, tasks, attempts

// An alternative shape of a step, tried once the task has waited `after_s`
// in the queue (e.g. nvidia-l40s after 10 minutes without an A100).
// `resources` is complete: the YAML's overrides merged onto the step's own.
struct StepShape {
  std::int64_t after_s = 0;
  Resources resources;  // per replica
  bool operator==(const StepShape&) const = default;
};
BOOST_DESCRIBE_STRUCT(StepShape, (), (after_s, resources))

struct Step {
  std::string name;
  std::vector<std::string> command;
  std::string image;
  std::map<std::string, std::string> env;
  Resources resources;  // per replica; gpu type folded in as "gpu/<type>"
  int replicas = 1;     // > 1: a gang, all replicas start together or none
  std::vector<std::string> depends_on;  // step names
  bool checkpoint = false;
  int max_retries = 0;
  std::vector<StepShape> fallbacks;  // tried in order, each after its wait
};
BOOST_DESCRIBE_STRUCT(Step, (),
                      (name, command, image, env, resources, replicas, depends_on, checkpoint, max_retries, fallbacks))

struct Pipeline {
  std::string id;
  std::string name;
  std::string project_group;
  Labels labels;
  std::string resource_group;
  std::string priority;
  Labels cluster_selector;
  std::string cluster;  // pinned cluster, optional
  std::vector<Step> steps;
  std::string submitted_by;
  Millis created_at = 0;
};
BOOST_DESCRIBE_STRUCT(Pipeline, (),
                      (id, name, project_group, labels, resource_group, priority, cluster_selector, cluster, steps,
                       submitted_by, created_at))

BOOST_DEFINE_ENUM_CLASS(TaskState, Queued, Admitted, Dispatched, Running, Preempting, Lost, Succeeded, Failed,
                        Cancelled)

bool is_terminal(TaskState s);
// Running-ish: holds resources on a cluster (Admitted .. Preempting).
bool holds_resources(TaskState s);
// The lifecycle of DESIGN.md; anything else is a bug in the caller.
bool can_transition(TaskState from, TaskState to);

// One structured reason a task waits (DESIGN.md "Explanation").
struct PendingReason {
  std::string code;        // "quota_exceeded", "no_matching_node", "cluster_offline", ...
  std::string message;     // English sentence with the figures
  std::string message_zh;  // Chinese sentence with the figures
  json::object details;    // e.g. {resource, used, requested, limit} or per-cause node counts
};
BOOST_DESCRIBE_STRUCT(PendingReason, (), (code, message, message_zh, details))

struct Task {
  std::string id;
  std::string pipeline_id;
  std::string name;  // step name
  std::string project_group;
  std::string resource_group;
  std::string priority_class;
  int priority = 0;  // the class's value at submit time
  std::string user;
  Step step;
  std::vector<std::string> depends_on;  // task ids
  Labels cluster_selector;
  std::string cluster;  // pinned
  TaskState state = TaskState::Queued;
  std::vector<PendingReason> reasons;  // why it waits (Queued), or why it ended
  int attempts = 0;  // number of attempts created so far
  int retries = 0;   // failed attempts retried so far
  std::string current_attempt;
  std::string assigned_cluster;
  // The storage pool the task is bound to, "" = none: its later attempts are
  // placed only on clusters of this pool, where its checkpoints and data are
  // (DESIGN.md "Agent protocol", fencing). Set by the server, never by the
  // submitter: when an attempt is Lost (the pool of the cluster that lost
  // it), and at the first placement of a step with `checkpoint` (its first
  // checkpoint is written to that cluster's pool).
  std::string storage_pool;
  std::optional<int> exit_code;
  bool cancel_requested = false;
  Millis created_at = 0;
  Millis updated_at = 0;
  Millis queued_at = 0;  // when it (re-)entered the queue
  Millis started_at = 0;
  Millis finished_at = 0;
};
BOOST_DESCRIBE_STRUCT(Task, (),
                      (id, pipeline_id, name, project_group, resource_group, priority_class, priority, user, step,
                       depends_on, cluster_selector, cluster, state, reasons, attempts, retries, current_attempt,
                       assigned_cluster, storage_pool, exit_code, cancel_requested, created_at, updated_at,
                       queued_at, started_at, finished_at))

struct ReplicaPlacement {
  int replica = 0;
  std::string node;
  std::vector<int> gpu_indices;
};
BOOST_DESCRIBE_STRUCT(ReplicaPlacement, (), (replica, node, gpu_indices))

// Unknown: its cluster fell silent, and its job may still run where the
// agent does not supervise it (Slurm, Kubernetes: DESIGN.md "Fencing and
// outages"). Not terminal: it still holds what it was given, its task keeps
// it, and nothing reruns until its agent reports its end or a platform admin
// confirms it lost (server/unknown_attempts.h). Last, so that stored names
// and codes of the others stay as they were.
BOOST_DEFINE_ENUM_CLASS(AttemptState, Dispatched, Running, Stopping, Succeeded, Failed, Cancelled, Preempted, Lost,
                        Unknown)
bool is_terminal(AttemptState s);

struct Attempt {
  std::string id;  // "<task id>.<number>"
  std::string task_id;
  int number = 1;
  std::int64_t epoch = 0;  // fencing token; reports with an older epoch are refused
  std::string cluster_id;
  std::vector<ReplicaPlacement> placements;
  Resources resources;  // per replica (placements.size() replicas); gpu names the type placed on
  AttemptState state = AttemptState::Dispatched;
  std::optional<int> exit_code;
  std::string stop_reason;  // cancel | preempt | superseded | lost; kept while Unknown
  std::string message;
  Millis created_at = 0;
  Millis started_at = 0;
  Millis finished_at = 0;
  Millis lease_renewed_at = 0;
  ResourceUse use;  // once ended: what its replicas used, as its agent measured (empty when not measured)
};
BOOST_DESCRIBE_STRUCT(Attempt, (),
                      (id, task_id, number, epoch, cluster_id, placements, resources, state, exit_code, stop_reason,
                       message, created_at, started_at, finished_at, lease_renewed_at, use))

// Append-only history: every state change of anything.
struct Event {
  std::int64_t id = 0;  // assigned by the store, increasing
  Millis at = 0;
  std::string actor;        // user name, "scheduler", "agent:<cluster>"
  std::string object_kind;  // task | attempt | cluster | node | resource_group | ...
  std::string object_id;
  std::string type;  // "task.state", "cluster.state", "resource_group.applied", ...
  std::string from;
  std::string to;
  std::string message;
  json::object data;
};
BOOST_DESCRIBE_STRUCT(Event, (), (id, at, actor, object_kind, object_id, type, from, to, message, data))

}  // namespace cp
