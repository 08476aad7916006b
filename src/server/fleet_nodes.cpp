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

namespace {

std::vector<NodeSummary> fleet_nodes_of(const std::vector<Node>& nodes) {
  std::vector<NodeSummary> out;
  out.reserve(nodes.size());
  for (const auto& n : nodes) out.push_back(NodeSummary::of(n));
  return out;
}

}  // namespace

void FleetNodes::changed(const std::string& cluster) {
  std::lock_guard lock(gen_mu_);
  ++gens_[cluster];
}

FleetNodes::Marks FleetNodes::marks() const {
  std::lock_guard lock(gen_mu_);
  return gens_;
}

std::int64_t FleetNodes::clusters_read() const {
  std::lock_guard lock(cache_mu_);
  return clusters_read_;
}

Status FleetNodes::visit(Tx& tx, const Marks& marks, const std::vector<Cluster>& clusters,
                         const std::function<void(const NodeSummary&)>& fn) {
  std::lock_guard lock(cache_mu_);
  std::set<std::string, std::less<>> present;
  std::vector<std::pair<const Cluster*, bool>> stale;  // and whether it is new here
  for (const auto& c : clusters) {
    present.insert(c.id);
    const auto m = marks.find(c.id);
    const std::uint64_t gen = m == marks.end() ? 0 : m->second;
    auto it = cache_.find(c.id);
    if (it == cache_.end()) {
      stale.push_back({&c, true});
    } else if (it->second.gen != gen || it->second.passes >= refresh_every_) {
      stale.push_back({&c, false});
    }
  }
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = present.count(it->first) ? std::next(it) : cache_.erase(it);  // deleted clusters
  }
  // Many to read (the first pass, say): one statement for the whole fleet.
  const bool whole_fleet = stale.size() > 8 && stale.size() * 2 > clusters.size();
  std::map<std::string, std::vector<NodeSummary>, std::less<>> read;
  if (whole_fleet) {
    CP_ASSIGN(auto all, tx.list_nodes(""));
    std::map<std::string, std::vector<Node>, std::less<>> by_cluster;
    for (auto& n : all) by_cluster[n.cluster_id].push_back(std::move(n));
    for (const auto& [c, first] : stale) {
      auto found = by_cluster.find(c->id);
      read[c->id] = found == by_cluster.end() ? std::vector<NodeSummary>{} : fleet_nodes_of(found->second);
    }
  } else {
    for (const auto& [c, first] : stale) {
      CP_ASSIGN(auto nodes, tx.list_nodes(c->id));
      read[c->id] = fleet_nodes_of(nodes);
    }
  }
  // Only once everything was read (a failed read changes nothing here).
  for (const auto& [c, first] : stale) {
    auto& e = cache_[c->id];
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
