#include "model/inventory.h"

#include "common/ids.h"
#include "common/json.h"

namespace cp {

std::string inventory_fingerprint(const std::vector<NodeReport>& nodes) {
  std::vector<NodeReport> stable = nodes;
  for (auto& n : stable) {
    for (auto& g : n.gpus) {
      g.utilization = 0;
      g.memory_used = 0;
    }
  }
  return sha256_hex(dump(to_json(stable))).substr(0, 32);
}

NodeGpuFigures gpu_figures_of(const NodeReport& node) {
  NodeGpuFigures f;
  f.node = node.name;
  f.utilization.reserve(node.gpus.size());
  f.memory_used.reserve(node.gpus.size());
  for (const auto& g : node.gpus) {
    f.utilization.push_back(g.utilization);
    f.memory_used.push_back(g.memory_used);
  }
  return f;
}

namespace {

bool same_figures(const NodeGpuFigures& a, const NodeGpuFigures& b) {
  return a.utilization == b.utilization && a.memory_used == b.memory_used;
}

}  // namespace

void InventoryReporter::fill(SyncRequest& req, const std::vector<NodeReport>& nodes, const std::string& fingerprint,
                             Millis now) {
  sent_fingerprint_ = fingerprint;
  sent_at_ = now;
  sent_figures_.clear();
  req.inventory = fingerprint;
  sent_full_ = held_.empty() || held_ != fingerprint || now - held_at_ >= full_every_ms_;
  if (sent_full_) {
    req.nodes = nodes;
    req.nodes_unchanged = false;
    req.gpu_figures.clear();
    for (const auto& n : nodes) sent_figures_.push_back(gpu_figures_of(n));
    return;
  }
  req.nodes.clear();
  req.nodes_unchanged = true;
  req.gpu_figures.clear();
  for (const auto& n : nodes) {
    auto f = gpu_figures_of(n);
    auto it = figures_.find(n.name);
    if (it != figures_.end() && same_figures(it->second, f)) continue;
    req.gpu_figures.push_back(f);
    sent_figures_.push_back(std::move(f));
  }
}

void InventoryReporter::answered(const SyncResponse& resp) {
  if (resp.send_inventory) {
    held_.clear();
    figures_.clear();
    return;
  }
  if (sent_full_) {
    held_ = sent_fingerprint_;
    held_at_ = sent_at_;
    figures_.clear();
  }
  for (auto& f : sent_figures_) {
    std::string name = f.node;
    figures_[name] = std::move(f);
  }
  sent_figures_.clear();
}

}  // namespace cp
