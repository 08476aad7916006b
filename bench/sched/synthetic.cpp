#include "synthetic.h"

#include <algorithm>
#include <cstdio>

#include "common/result.h"

namespace cp::bench {
namespace {

constexpr std::int64_t kGi = std::int64_t{1} << 30;
constexpr std::int64_t kSecond = 1000;
const std::vector<std::string> kRegions = {"us-east", "us-west", "eu-central", "ap-south"};

std::string numbered(const char* prefix, std::int64_t n, int width) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%0*lld", prefix, width, static_cast<long long>(n));
  return buf;
}

// Uniform integer in [lo, hi].
std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

double unit(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

template <typename T>
const T& pick(const std::vector<T>& v, std::mt19937_64& rng) {
  return v[static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(v.size()) - 1))];
}

Resources cpu_memory(std::int64_t cores, std::int64_t memory_gi) {
  Resources r;
  r.set(kCpu, cores * 1000);
  r.set(kMemory, memory_gi * kGi);
  return r;
}

}  // namespace

Fleet::Fleet(const FleetShape& shape, std::mt19937_64& rng) : shape_(shape) {
  kinds_ = {
      {"nvidia-a100-80gb", 8, 96, 1024, 35},
      {"nvidia-h100-80gb", 8, 128, 2048, 25},
      {"nvidia-l40s", 4, 64, 512, 15},
      {"", 0, 64, 256, 25},
  };

  snapshot.priority_classes = {
      PriorityClass{std::string(kInference), 1000, false, false, 0, 30, "serving", 0},
      PriorityClass{std::string(kUrgent), 500, true, true, 600, 30, "deadline work", 0},
      PriorityClass{std::string(kBatch), 100, true, false, 0, 30, "everything else", 0},
  };

  for (int c = 0; c < shape.clusters; ++c) {
    Cluster cl;
    cl.id = numbered("c", c, 3);
    cl.display_name = cl.id;
    cl.executor = c % 3 == 0 ? ExecutorKind::slurm : ExecutorKind::kubernetes;
    regions_.push_back(kRegions[static_cast<std::size_t>(c) % kRegions.size()]);
    cl.labels = {{"region", regions_.back()}};
    cl.state = ClusterState::online;
    cl.state_reason = "";
    snapshot.clusters.push_back(std::move(cl));
  }

  // Nodes round-robin over clusters, each of a kind drawn by weight.
  std::discrete_distribution<int> kind_draw({35.0, 25.0, 15.0, 25.0});
  // GPUs, cpu cores, memory GiB per cluster and kind, for the quotas below.
  std::vector<std::vector<std::int64_t>> gpus(static_cast<std::size_t>(shape.clusters),
                                              std::vector<std::int64_t>(kinds_.size(), 0));
  std::vector<std::int64_t> cores(static_cast<std::size_t>(shape.clusters), 0);
  std::vector<std::int64_t> memory(static_cast<std::size_t>(shape.clusters), 0);
  for (int i = 0; i < shape.nodes; ++i) {
    int c = i % shape.clusters;
    int k = kind_draw(rng);
    const NodeKind& kind = kinds_[static_cast<std::size_t>(k)];
    nodes_.push_back(NodeInfo{k, c, -1});
    Node n;
    n.cluster_id = snapshot.clusters[static_cast<std::size_t>(c)].id;
    n.name = n.cluster_id + numbered("-n", i, 5);
    n.labels = {{"zone", regions_[static_cast<std::size_t>(c)] + "-" + std::to_string(i % 3)}};
    n.capacity = cpu_memory(kind.cpu, kind.memory_gi);
    if (kind.gpus > 0) {
      n.labels[std::string(kLabelGpuType)] = kind.gpu_type;
      n.capacity.set(gpu_resource(k), kind.gpus);
      for (int g = 0; g < kind.gpus; ++g) {
        n.gpus.push_back(GpuDevice{g, "GPU-" + n.name + "-" + std::to_string(g), kind.gpu_type, 80 * kGi, 0, 0});
      }
    }
    n.allocatable = n.capacity;
    n.facts = HostFacts{"linux", "6.1", "containerd", "550.54", "12.4", 0};
    snapshot.nodes.push_back(std::move(n));
    gpus[static_cast<std::size_t>(c)][static_cast<std::size_t>(k)] += kind.gpus;
    cores[static_cast<std::size_t>(c)] += kind.cpu;
    memory[static_cast<std::size_t>(c)] += kind.memory_gi;
  }

  // Resource groups over 1-3 clusters each.
  cluster_groups_.resize(static_cast<std::size_t>(shape.clusters));
  group_clusters_.resize(static_cast<std::size_t>(shape.groups));
  for (int g = 0; g < shape.groups; ++g) {
    auto want = std::min<std::int64_t>(uniform(rng, 1, 3), shape.clusters);
    auto& mine = group_clusters_[static_cast<std::size_t>(g)];
    while (static_cast<std::int64_t>(mine.size()) < want) {
      int c = static_cast<int>(uniform(rng, 0, shape.clusters - 1));
      if (std::find(mine.begin(), mine.end(), c) == mine.end()) mine.push_back(c);
    }
    for (int c : mine) cluster_groups_[static_cast<std::size_t>(c)].push_back(g);
  }

  // Quotas: a group is guaranteed its share of each cluster it uses (the
  // cluster's capacity over the number of groups using it), times a factor
  // from U(0.5, 1.5), so that the guarantees add up to about the fleet and
  // some groups are short while others have room. Groups in a cohort may
  // borrow up to twice their guarantee.
  int cohorts = std::max(1, shape.groups / 8);
  for (int g = 0; g < shape.groups; ++g) {
    ResourceGroup rg;
    rg.name = numbered("rg-", g, 3);
    double factor = 0.5 + unit(rng);
    bool in_cohort = unit(rng) < 0.6;
    if (in_cohort) rg.cohort = numbered("cohort-", g % cohorts, 2);
    double share_cores = 0, share_memory = 0;
    std::vector<double> share_gpus(kinds_.size(), 0.0);
    for (int c : group_clusters_[static_cast<std::size_t>(g)]) {
      auto users = static_cast<double>(cluster_groups_[static_cast<std::size_t>(c)].size());
      rg.clusters.push_back(snapshot.clusters[static_cast<std::size_t>(c)].id);
      share_cores += static_cast<double>(cores[static_cast<std::size_t>(c)]) / users;
      share_memory += static_cast<double>(memory[static_cast<std::size_t>(c)]) / users;
      for (std::size_t k = 0; k < kinds_.size(); ++k) {
        share_gpus[k] += static_cast<double>(gpus[static_cast<std::size_t>(c)][k]) / users;
      }
    }
    auto entry = [&](std::int64_t guaranteed) {
      QuotaEntry e{guaranteed, std::nullopt};
      if (in_cohort) e.max = guaranteed * 2;
      return e;
    };
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      auto amount = static_cast<std::int64_t>(share_gpus[k] * factor);
      if (kinds_[k].gpus > 0 && amount > 0) rg.quota[gpu_resource(static_cast<int>(k))] = entry(amount);
    }
    rg.quota[std::string(kCpu)] = entry(static_cast<std::int64_t>(share_cores * factor) * 1000);
    rg.quota[std::string(kMemory)] = entry(static_cast<std::int64_t>(share_memory * factor) * kGi);
    rg.placement = unit(rng) < 0.8 ? PlacementPolicy::binpack : PlacementPolicy::spread;
    snapshot.resource_groups.push_back(std::move(rg));
  }

  // Project groups: resource group g belongs to project group g % P, and each
  // project group has one more at random half of the time.
  project_groups_.resize(static_cast<std::size_t>(shape.project_groups));
  group_projects_.resize(static_cast<std::size_t>(shape.groups));
  for (int g = 0; g < shape.groups; ++g) {
    int p = g % shape.project_groups;
    project_groups_[static_cast<std::size_t>(p)].push_back(g);
    group_projects_[static_cast<std::size_t>(g)].push_back(p);
  }
  for (int p = 0; p < shape.project_groups; ++p) {
    auto& mine = project_groups_[static_cast<std::size_t>(p)];
    if (mine.empty() || unit(rng) < 0.5) {
      int g = static_cast<int>(uniform(rng, 0, shape.groups - 1));
      if (std::find(mine.begin(), mine.end(), g) == mine.end()) {
        mine.push_back(g);
        group_projects_[static_cast<std::size_t>(g)].push_back(p);
      }
    }
  }
  held_.resize(static_cast<std::size_t>(shape.groups));
  owned_gpu_nodes_.resize(static_cast<std::size_t>(shape.groups));
}

const NodeKind& Fleet::kind_of(int node) const {
  return kinds_[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(node)].kind)];
}

std::string Fleet::gpu_resource(int kind) const {
  return std::string(kGpuPrefix) + kinds_[static_cast<std::size_t>(kind)].gpu_type;
}

Resources Fleet::gpu_share(int node, int gpus) const {
  const NodeKind& k = kind_of(node);
  Resources r = cpu_memory(k.cpu * gpus / k.gpus, k.memory_gi * gpus / k.gpus);
  r.set(gpu_resource(nodes_[static_cast<std::size_t>(node)].kind), gpus);
  return r;
}

int Fleet::group_for(int cluster, const Resources& piece, std::mt19937_64& rng) {
  const auto& candidates = cluster_groups_[static_cast<std::size_t>(cluster)];
  if (candidates.empty()) return -1;
  // A few tries for a group whose ceiling still has room; else any of them
  // (the snapshot then holds a group above its quota, as after a quota cut).
  for (int attempt = 0; attempt < 4; ++attempt) {
    int g = pick(candidates, rng);
    const ResourceGroup& rg = snapshot.resource_groups[static_cast<std::size_t>(g)];
    auto& held = held_[static_cast<std::size_t>(g)];
    bool fits = true;
    for (const auto& [name, amount] : piece.amounts()) {
      auto q = rg.quota.find(name);
      std::int64_t ceiling = q == rg.quota.end() ? 0 : q->second.max.value_or(q->second.guaranteed);
      if (held[name] + amount > ceiling) fits = false;
    }
    if (fits) return g;
  }
  return pick(candidates, rng);
}

std::string Fleet::project_group_of(int group, std::mt19937_64& rng) const {
  return numbered("pg-", pick(group_projects_[static_cast<std::size_t>(group)], rng), 3);
}

sched::RunningWork Fleet::piece(int node, int group, std::string_view priority_class, const Resources& per_replica,
                                std::vector<int> gpu_indices, Millis now, std::mt19937_64& rng) {
  sched::RunningWork w;
  w.task_id = numbered("r", next_running_++, 7);
  w.attempt_id = w.task_id + ".1";
  w.resource_group = snapshot.resource_groups[static_cast<std::size_t>(group)].name;
  w.project_group = project_group_of(group, rng);
  w.user = w.project_group + "-u" + std::to_string(uniform(rng, 0, 4));
  w.cluster_id = snapshot.nodes[static_cast<std::size_t>(node)].cluster_id;
  for (const auto& pc : snapshot.priority_classes) {
    if (pc.name == priority_class) {
      w.priority = pc.value;
      w.preemptible = pc.preemptible;
    }
  }
  w.checkpoint = unit(rng) < 0.5;
  w.per_replica = per_replica;
  const std::string& name = snapshot.nodes[static_cast<std::size_t>(node)].name;
  w.placements.push_back(ReplicaPlacement{0, name, std::move(gpu_indices)});
  w.started_at = now - uniform(rng, 60, 6 * 3600) * kSecond;
  for (const auto& [name, amount] : per_replica.amounts()) held_[static_cast<std::size_t>(group)][name] += amount;
  return w;
}

std::vector<sched::RunningWork> Fleet::occupy(Fill fill, Millis now, std::mt19937_64& rng) {
  std::vector<sched::RunningWork> out;
  for (auto& h : held_) h.clear();
  for (auto& o : owned_gpu_nodes_) o.clear();
  const std::vector<int> gpu_sizes = {1, 2, 4, 8};
  const std::vector<int> cpu_sizes = {4, 8, 16};
  for (int i = 0; i < shape_.nodes; ++i) {
    NodeInfo& node = nodes_[static_cast<std::size_t>(i)];
    const NodeKind& kind = kinds_[static_cast<std::size_t>(node.kind)];
    const auto& candidates = cluster_groups_[static_cast<std::size_t>(node.cluster)];
    if (candidates.empty()) continue;  // no group can use this cluster
    double fraction = fill == Fill::kFull ? 1.0 : 0.2 + 0.8 * unit(rng);
    node.owner = fill == Fill::kFull ? pick(candidates, rng) : -1;
    if (node.owner >= 0 && kind.gpus > 0) owned_gpu_nodes_[static_cast<std::size_t>(node.owner)].push_back(i);

    auto priority_class = [&]() -> std::string_view {
      double u = unit(rng);
      if (fill == Fill::kFull) return u < 0.8 ? kBatch : kInference;
      return u < 0.5 ? kBatch : (u < 0.8 ? kUrgent : kInference);
    };
    auto add = [&](const Resources& per_replica, std::vector<int> indices) {
      int g = node.owner >= 0 ? node.owner : group_for(node.cluster, per_replica, rng);
      std::string_view pc = priority_class();
      out.push_back(piece(i, g, pc, per_replica, std::move(indices), now, rng));
      if (fill == Fill::kPartial && unit(rng) < 0.02) out.back().stopping = true;
    };

    if (kind.gpus > 0) {
      int target = static_cast<int>(kind.gpus * fraction + 0.5);
      int used = 0;
      while (used < target) {
        int size = pick(gpu_sizes, rng);
        while (size > target - used) size /= 2;
        std::vector<int> indices;
        for (int g = used; g < used + size; ++g) indices.push_back(g);
        add(gpu_share(i, size), std::move(indices));
        used += size;
      }
    } else {
      int target = static_cast<int>(kind.cpu * fraction);
      int used = 0;
      while (target - used >= 4) {
        int size = pick(cpu_sizes, rng);
        while (size > target - used) size /= 2;
        add(cpu_memory(size, size * kind.memory_gi / kind.cpu), {});
        used += size;
      }
    }
  }
  return out;
}

void Fleet::make_room_in_quota(const std::vector<sched::RunningWork>& running, std::int64_t headroom) {
  std::map<std::string, std::map<std::string, std::int64_t>> held;
  for (const auto& w : running) {
    for (const auto& [name, amount] : w.per_replica.amounts()) {
      held[w.resource_group][name] += amount * static_cast<std::int64_t>(w.placements.size());
    }
  }
  for (auto& rg : snapshot.resource_groups) {
    auto& mine = held[rg.name];
    auto raise = [&](const std::string& name, std::int64_t room) {
      QuotaEntry& e = rg.quota[name];
      e.guaranteed = std::max(e.guaranteed, mine[name] + room);
      if (e.max) e.max = std::max(*e.max, e.guaranteed);
    };
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      if (kinds_[k].gpus > 0) raise(gpu_resource(static_cast<int>(k)), headroom);
    }
    raise(std::string(kCpu), headroom * 16 * 1000);
    raise(std::string(kMemory), headroom * 256 * kGi);
  }
}

void Fleet::set_class(Task& t, std::string_view priority_class) const {
  for (const auto& pc : snapshot.priority_classes) {
    if (pc.name == priority_class) {
      t.priority_class = pc.name;
      t.priority = pc.value;
    }
  }
}

sched::QueuedTask Fleet::task(Millis queued_at, std::mt19937_64& rng) {
  sched::QueuedTask q;
  Task& t = q.task;
  std::int64_t n = next_task_++;
  t.id = numbered("t", n, 7);
  t.pipeline_id = numbered("p", n, 7);
  t.name = "train";
  int p = static_cast<int>(uniform(rng, 0, shape_.project_groups - 1));
  int g = pick(project_groups_[static_cast<std::size_t>(p)], rng);
  const ResourceGroup& rg = snapshot.resource_groups[static_cast<std::size_t>(g)];
  t.project_group = numbered("pg-", p, 3);
  t.resource_group = rg.name;
  t.user = t.project_group + "-u" + std::to_string(uniform(rng, 0, 4));
  double c = unit(rng);
  set_class(t, c < 0.10 ? kInference : (c < 0.25 ? kUrgent : kBatch));

  // A GPU type the group has quota for (by the size of that quota), now and
  // then any type at all: such a task waits on quota.
  auto gpu_type = [&]() -> std::string {
    std::vector<std::string> types;
    std::vector<double> weights;
    for (const auto& [name, entry] : rg.quota) {
      if (name.starts_with(kGpuPrefix)) {
        types.push_back(name);
        weights.push_back(static_cast<double>(entry.guaranteed));
      }
    }
    if (types.empty() || unit(rng) < 0.05) return gpu_resource(static_cast<int>(uniform(rng, 0, 2)));
    std::discrete_distribution<std::size_t> d(weights.begin(), weights.end());
    return types[d(rng)];
  };

  Step& s = t.step;
  s.name = "train";
  s.image = "registry.example.com/ml/train:2026.01";
  s.command = {"python", "-m", "train", "--config", "configs/" + t.id + ".yaml"};
  s.env = {{"WANDB_PROJECT", t.project_group}, {"NCCL_DEBUG", "WARN"}};
  s.checkpoint = unit(rng) < 0.5;
  s.max_retries = 2;
  int shape = static_cast<int>(uniform(rng, 0, 99));
  std::int64_t gpus = 0;
  bool any = false;
  if (shape < 20) {  // CPU only
    std::int64_t cores = std::int64_t{1} << uniform(rng, 0, 4);
    s.resources = cpu_memory(cores, cores * 4);
  } else if (shape < 45) {
    gpus = 1;
  } else if (shape < 60) {
    gpus = 2;
  } else if (shape < 70) {
    gpus = 4;
  } else if (shape < 78) {
    gpus = 8;
  } else if (shape < 88) {  // a gang
    gpus = unit(rng) < 0.5 ? 4 : 8;
    s.replicas = static_cast<int>(uniform(rng, 2, 8));
  } else {
    gpus = std::int64_t{1} << uniform(rng, 0, 2);
    any = true;
  }
  if (gpus > 0) {
    s.resources = cpu_memory(gpus * 8, gpus * 64);
    std::string type = any ? std::string(sched::kGpuAny) : gpu_type();
    s.resources.set(type, gpus);
    // Some single A100/H100 tasks accept an L40S after ten minutes.
    if (!any && s.replicas == 1 && gpus <= 4 && type != gpu_resource(2) && unit(rng) < 0.05) {
      Resources fallback = cpu_memory(gpus * 8, gpus * 64);
      fallback.set(gpu_resource(2), gpus);
      s.fallbacks.push_back(StepShape{600, fallback});
    }
  }

  const auto& clusters = group_clusters_[static_cast<std::size_t>(g)];
  double placement = unit(rng);
  if (placement < 0.10) {  // a region selector, nearly always one the group has
    int cl = unit(rng) < 0.9 ? pick(clusters, rng) : static_cast<int>(uniform(rng, 0, shape_.clusters - 1));
    t.cluster_selector = {{"region", regions_[static_cast<std::size_t>(cl)]}};
  } else if (placement < 0.13) {  // pinned
    t.cluster = snapshot.clusters[static_cast<std::size_t>(pick(clusters, rng))].id;
  }
  t.queued_at = queued_at;
  t.created_at = queued_at - uniform(rng, 0, 60) * kSecond;
  t.updated_at = queued_at;
  t.attempts = 0;
  return q;
}

std::vector<sched::QueuedTask> Fleet::tasks(int n, Millis now, Millis spread, std::mt19937_64& rng) {
  std::vector<sched::QueuedTask> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(task(now - uniform(rng, 0, spread), rng));
  return out;
}

sched::QueuedTask Fleet::urgent_preemptor(Millis now, std::mt19937_64& rng) {
  int g = 0;
  int tries = 0;
  do {
    CP_CHECK(++tries < 100000, "urgent_preemptor: no group owns a GPU node; occupy(Fill::kFull) first");
    g = static_cast<int>(uniform(rng, 0, shape_.groups - 1));
  } while (owned_gpu_nodes_[static_cast<std::size_t>(g)].empty());
  int node = pick(owned_gpu_nodes_[static_cast<std::size_t>(g)], rng);
  const NodeKind& kind = kind_of(node);
  int gpus = std::min(kind.gpus, 1 << uniform(rng, 0, 3));

  sched::QueuedTask q;
  Task& t = q.task;
  std::int64_t n = next_task_++;
  t.id = numbered("u", n, 7);
  t.pipeline_id = numbered("p", n, 7);
  t.name = "deadline";
  t.resource_group = snapshot.resource_groups[static_cast<std::size_t>(g)].name;
  t.project_group = project_group_of(g, rng);
  t.user = t.project_group + "-u0";
  set_class(t, kUrgent);
  t.step.name = "deadline";
  t.step.image = "registry.example.com/ml/train:2026.01";
  t.step.command = {"python", "-m", "train"};
  t.step.resources = gpu_share(node, gpus);
  t.step.checkpoint = true;
  // Past the class's preempt_after_s (600 s), by up to an hour.
  t.queued_at = now - uniform(rng, 700, 3600) * kSecond;
  t.created_at = t.queued_at;
  return q;
}

sched::RunningWork Fleet::running_from(const sched::QueuedTask& queued, const sched::Placement& placement,
                                       Millis now) const {
  const Task& t = queued.task;
  sched::RunningWork w;
  w.task_id = t.id;
  w.attempt_id = t.id + ".1";
  w.resource_group = t.resource_group;
  w.project_group = t.project_group;
  w.user = t.user;
  w.cluster_id = placement.cluster_id;
  w.priority = t.priority;
  for (const auto& pc : snapshot.priority_classes) {
    if (pc.name == t.priority_class) w.preemptible = pc.preemptible;
  }
  w.checkpoint = t.step.checkpoint;
  w.per_replica = placement.per_replica;
  w.placements = placement.placements;
  w.started_at = now;
  return w;
}

}  // namespace cp::bench
