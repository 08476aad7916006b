#include "server/fleet_nodes.h"

#include <set>

namespace cp {

NodeSummary NodeSummary::of(const Node& n) {
  NodeSummary f;
  f.cluster_id = n.cluster_id;
  f.name = n.name;
  f.ready = n.ready;
  f.in_maintenance = n.in_maintenance();
  f.not_ready_reason = n.not_ready_reason;
  f.gpus_total = n.capacity.gpus();
  f.gpu_utilization.reserve(n.gpus.size());
  for (const auto& g : n.gpus) f.gpu_utilization.push_back(g.utilization);
  return f;
}

void FleetNodes::changed(const std::string& cluster) {
  std::lock_guard lock(gen_mu_);
  ++gens_[cluster];
}

FleetNodes::Marks FleetNodes::marks() const {
  std::lock_guard lock(gen_mu_);
  return gens_;
}

std::uint64_t FleetNodes::gen_of(const Marks& marks, std::string_view cluster) {
  const auto m = marks.find(cluster);
  return m == marks.end() ? 0 : m->second;
}

std::int64_t FleetNodes::clusters_read() const {
  std::lock_guard lock(cache_mu_);
  return clusters_read_;
}

Status FleetNodes::visit(Tx& tx, const Marks& marks, const std::vector<Cluster>& clusters,
                         const std::function<void(const NodeSummary&)>& fn) {
  std::lock_guard lock(cache_mu_);
  std::set<std::string, std::less<>> present;
  std::vector<const Cluster*> stale;
  for (const auto& c : clusters) {
    present.insert(c.id);
    const std::uint64_t gen = gen_of(marks, c.id);
    auto it = cache_.find(c.id);
    if (it == cache_.end() || it->second.gen != gen || it->second.passes >= refresh_every_) stale.push_back(&c);
  }
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = present.count(it->first) ? std::next(it) : cache_.erase(it);  // deleted clusters
  }
  // Many to read (the first pass, say): one statement for the whole fleet.
  std::map<std::string, std::vector<NodeSummary>, std::less<>> read;
  if (stale.size() > 8 && stale.size() * 2 > clusters.size()) {
    CP_ASSIGN(auto all, tx.list_nodes(""));
    for (const auto& n : all) read[n.cluster_id].push_back(NodeSummary::of(n));
  } else {
    for (const Cluster* c : stale) {
      CP_ASSIGN(auto nodes, tx.list_nodes(c->id));
      auto& summaries = read[c->id];
      for (const auto& n : nodes) summaries.push_back(NodeSummary::of(n));
    }
  }
  // Only once everything was read (a failed read changes nothing here).
  for (const Cluster* c : stale) {
    auto [it, first] = cache_.try_emplace(c->id);
    Entry& e = it->second;
    e.nodes = std::move(read[c->id]);
    const auto m = marks.find(c->id);
    e.gen = m == marks.end() ? 0 : m->second;
    // Staggered after the first read (the next one comes after refresh_every
    // to twice that many passes), so that the re-reads of a fleet read at
    // once do not all fall on one later pass.
    e.passes = first ? -static_cast<int>(std::hash<std::string>{}(c->id) % static_cast<std::size_t>(refresh_every_)) : 0;
    ++clusters_read_;
  }
  for (const auto& c : clusters) {
    auto& e = cache_.at(c.id);
    ++e.passes;
    for (const auto& n : e.nodes) fn(n);
  }
  return {};
}

}  // namespace cp
