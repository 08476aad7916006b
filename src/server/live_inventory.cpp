#include "server/live_inventory.h"

#include "model/inventory.h"

namespace cp {

std::optional<LiveInventory::Held> LiveInventory::held(const std::string& cluster) const {
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster);
  if (it == clusters_.end()) return std::nullopt;
  return it->second.held;
}

void LiveInventory::stored(const std::string& cluster, const std::string& instance, std::int64_t seq,
                           const std::string& fingerprint, Millis clock_offset_ms,
                           const std::vector<NodeReport>& nodes) {
  std::lock_guard lock(mu_);
  auto& e = clusters_[cluster];
  // Two syncs of one agent commit in the order of their seq; this keeps a
  // late-running caller of the older one from undoing the newer.
  if (e.instance == instance && seq != 0 && seq < e.seq) return;
  e.instance = instance;
  e.seq = seq;
  if (fingerprint.empty()) {
    e.held.reset();
  } else {
    e.held = Held{fingerprint, clock_offset_ms};
  }
  e.nodes.clear();
  for (const auto& n : nodes) e.nodes.emplace(n.name, gpu_figures_of(n));
}

void LiveInventory::offset_stored(const std::string& cluster, Millis clock_offset_ms) {
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster);
  if (it != clusters_.end() && it->second.held) it->second.held->clock_offset_ms = clock_offset_ms;
}

void LiveInventory::figures(const std::string& cluster, const std::vector<NodeGpuFigures>& moved) {
  if (moved.empty()) return;
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster);
  if (it == clusters_.end()) return;
  for (const auto& m : moved) {
    auto n = it->second.nodes.find(m.node);
    if (n == it->second.nodes.end()) continue;  // not a node of the inventory held
    n->second.utilization = m.utilization;
    n->second.memory_used = m.memory_used;
  }
}

void LiveInventory::forget(const std::string& cluster) {
  std::lock_guard lock(mu_);
  clusters_.erase(cluster);
}

const NodeGpuFigures* LiveInventory::find_locked(const std::string& cluster, const std::string& name,
                                                std::size_t gpus) const {
  auto c = clusters_.find(cluster);
  if (c == clusters_.end()) return nullptr;
  auto it = c->second.nodes.find(name);
  if (it == c->second.nodes.end()) return nullptr;
  const NodeGpuFigures& f = it->second;
  if (f.utilization.size() != gpus || f.memory_used.size() != gpus) return nullptr;
  return &f;
}

void LiveInventory::overlay_locked(const std::string& cluster, const std::string& name,
                                   std::vector<GpuDevice>& gpus) const {
  const NodeGpuFigures* f = find_locked(cluster, name, gpus.size());
  if (f == nullptr) return;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].utilization = f->utilization[i];
    gpus[i].memory_used = f->memory_used[i];
  }
}

void LiveInventory::overlay(Node& node) const {
  std::lock_guard lock(mu_);
  overlay_locked(node.cluster_id, node.name, node.gpus);
}

std::vector<int> LiveInventory::live_utilization(const std::string& cluster, const std::string& name,
                                                 const std::vector<int>& stored) const {
  std::lock_guard lock(mu_);
  const NodeGpuFigures* f = find_locked(cluster, name, stored.size());
  return f == nullptr ? stored : f->utilization;
}

void LiveInventory::overlay(std::vector<Node>& nodes) const {
  std::lock_guard lock(mu_);
  for (auto& n : nodes) overlay_locked(n.cluster_id, n.name, n.gpus);
}

}  // namespace cp
