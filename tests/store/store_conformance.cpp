// Builders for the conformance suite (store_conformance.h).
#include "store_conformance.h"

namespace cp::testing {

Cluster make_cluster(const std::string& id) {
  Cluster c;
  c.id = id;
  c.display_name = "Cluster " + id;
  c.executor = ExecutorKind::slurm;
  c.storage_pool = "pool-east";
  c.labels = {{"region", "east"}, {"tier", "gold"}};
  c.state = ClusterState::degraded;
  c.state_reason = "engine_error";
  c.state_message = "slurmctld unreachable";
  c.last_contact = kT0 + 5'000;
  c.credential_expires_at = kT0 + 3'600'000;
  c.agent_instance = "agent-1";
  c.agent_version = "0.1.0";
  c.created_at = kT0;
  c.updated_at = kT0 + 5'000;
  return c;
}

Node make_node(const std::string& cluster_id, const std::string& name) {
  Node n;
  n.cluster_id = cluster_id;
  n.name = name;
  n.labels = {{"gpu-type", "nvidia-a100-80gb"}, {"pool", "train"}};
  n.label_overrides = {};
  n.capacity = Resources::parse_or_die("cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8");
  n.allocatable = Resources::parse_or_die("cpu:62,memory:500Gi,gpu/nvidia-a100-80gb:8");
  n.ready = false;
  n.not_ready_reason = "KubeletNotReady";
  n.facts = HostFacts{"ubuntu 22.04", "5.15.0", "containerd 1.7", "535.104", "12.2", 3};
  n.gpus = {GpuDevice{0, "GPU-aaa", "nvidia-a100-80gb", 85'899'345'920, 1'073'741'824, 37},
            GpuDevice{1, "GPU-bbb", "nvidia-a100-80gb", 85'899'345'920, 0, 0}};
  n.updated_at = kT0 + 1'000;
  return n;
}

ResourceGroup make_resource_group(const std::string& name) {
  ResourceGroup rg;
  rg.name = name;
  rg.clusters = {"c-east", "c-west"};
  rg.node_selector = {{"pool", "train"}};
  rg.quota = {{"gpu/nvidia-a100-80gb", QuotaEntry{16, 24}}, {"cpu", QuotaEntry{64'000, std::nullopt}}};
  rg.cohort = "research";
  rg.required_labels = {{"team", "proj-b"}};
  rg.placement = PlacementPolicy::spread;
  rg.alerts = AlertPolicy{{60, 80}, 120, "https://hooks.example/rg"};
  rg.default_request = Resources::parse_or_die("cpu:1,memory:2Gi");
  rg.max_per_task = Resources::parse_or_die("gpu/nvidia-a100-80gb:8");
  rg.created_at = kT0;
  rg.updated_at = kT0 + 10;
  return rg;
}

ProjectGroup make_project_group(const std::string& name) {
  ProjectGroup pg;
  pg.name = name;
  pg.members = {Member{"alice", ProjectRole::admin}, Member{"bob", ProjectRole::viewer}};
  pg.default_resource_group = "rg-a";
  pg.resource_groups = {ResourceGroupGrant{"rg-b", "required"}};
  pg.monthly_budget = Budget{1000, std::nullopt};
  pg.created_at = kT0;
  pg.updated_at = kT0 + 20;
  return pg;
}

PriorityClass make_priority_class(const std::string& name, int value) {
  PriorityClass pc;
  pc.name = name;
  pc.value = value;
  pc.preemptible = false;
  pc.may_preempt = true;
  pc.preempt_after_s = 600;
  pc.grace_s = 45;
  pc.description = "urgent work";
  pc.created_at = kT0;
  return pc;
}

Pipeline make_pipeline(const std::string& id, const std::string& project_group) {
  Pipeline p;
  p.id = id;
  p.name = "train-llm";
  p.project_group = project_group;
  p.labels = {{"team", "proj-b"}};
  p.resource_group = "rg-a";
  p.priority = "high";
  p.cluster_selector = {{"region", "east"}};
  p.cluster = "c-east";
  Step step;
  step.name = "train";
  step.command = {"python", "train.py", "--epochs=3"};
  step.image = "registry.example/train:1";
  step.env = {{"SEED", "7"}};
  step.resources = Resources::parse_or_die("cpu:8,memory:64Gi,gpu/nvidia-a100-80gb:4");
  step.replicas = 2;
  step.depends_on = {"prepare"};
  step.checkpoint = true;
  step.max_retries = 3;
  p.steps = {step};
  p.submitted_by = "alice";
  p.created_at = kT0;
  return p;
}

Task make_task(const std::string& id, Millis created_at, TaskState state, const std::string& project_group,
               const std::string& resource_group) {
  Task t;
  t.id = id;
  t.pipeline_id = "p-1";
  t.name = "train";
  t.project_group = project_group;
  t.resource_group = resource_group;
  t.priority_class = "high";
  t.priority = 100;
  t.user = "alice";
  t.step.name = "train";
  t.step.command = {"python", "train.py"};
  t.step.resources = Resources::parse_or_die("cpu:8,gpu/nvidia-a100-80gb:4");
  t.depends_on = {"t-prepare"};
  t.cluster_selector = {{"region", "east"}};
  t.state = state;
  t.reasons = {PendingReason{"quota_exceeded", "quota: gpu 16 of 16 in use", "配额已满", {}}};
  t.reasons[0].details["used"] = 16;
  t.attempts = 1;
  t.current_attempt = id + ".1";
  t.assigned_cluster = holds_resources(state) ? "c-east" : "";
  t.created_at = created_at;
  t.updated_at = created_at;
  t.queued_at = created_at;
  return t;
}

Attempt make_attempt(const std::string& task_id, int number, const std::string& cluster_id, AttemptState state) {
  Attempt a;
  a.id = task_id + "." + std::to_string(number);
  a.task_id = task_id;
  a.number = number;
  a.epoch = 40 + number;
  a.cluster_id = cluster_id;
  a.placements = {ReplicaPlacement{0, "node-1", {0, 1}}, ReplicaPlacement{1, "node-2", {3}}};
  a.resources = Resources::parse_or_die("gpu/nvidia-a100-80gb:3");
  a.state = state;
  if (is_terminal(state)) a.exit_code = 137;
  a.stop_reason = is_terminal(state) ? "preempt" : "";
  a.message = "attempt " + std::to_string(number);
  a.created_at = kT0 + number;
  a.started_at = kT0 + number + 1;
  a.lease_renewed_at = kT0 + number + 2;
  return a;
}

Event make_event(const std::string& object_kind, const std::string& object_id, Millis at, const std::string& type) {
  Event e;
  e.at = at;
  e.actor = "scheduler";
  e.object_kind = object_kind;
  e.object_id = object_id;
  e.type = type;
  e.from = "Queued";
  e.to = "Admitted";
  e.message = "admitted into rg-a";
  e.data["resource_group"] = "rg-a";
  e.data["gpus"] = 4;
  return e;
}

std::vector<std::string> ids_of(const std::vector<Task>& tasks) {
  std::vector<std::string> ids;
  for (const auto& t : tasks) ids.push_back(t.id);
  return ids;
}

}  // namespace cp::testing
