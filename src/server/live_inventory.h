// What the server keeps in memory about each cluster's inventory, beside the
// node rows in the store:
// - the fingerprint of the inventory it last stored (model/inventory.h), so
//   that a sync whose agent says "unchanged" skips reading, comparing and
//   writing the cluster's nodes, and the clock offset it stored with it;
// - the live GPU figures (utilization, memory used), which move at every
//   inventory read and are not worth a row write each time: readers of nodes
//   (the API, the fleet samples) lay them over the stored rows.
// Lost on restart by design: an agent naming a fingerprint the server does
// not hold is asked for its nodes (SyncResponse::send_inventory).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/protocol.h"
#include "model/types.h"

namespace cp {

class LiveInventory {
 public:
  struct Held {
    std::string fingerprint;
    Millis clock_offset_ms = 0;
  };

  std::optional<Held> held(const std::string& cluster) const;

  // After a commit that stored the cluster's whole inventory: `nodes` as the
  // agent reported them (their GPU figures become the live ones). An empty
  // fingerprint (an agent that sends none) is held as unknown.
  void stored(const std::string& cluster, const std::string& instance, std::int64_t seq,
              const std::string& fingerprint, Millis clock_offset_ms, const std::vector<NodeReport>& nodes);
  // After a commit that rewrote the stored nodes' clock offset.
  void offset_stored(const std::string& cluster, Millis clock_offset_ms);
  // Figures that moved, from a sync that left its nodes out.
  void figures(const std::string& cluster, const std::vector<NodeGpuFigures>& moved);
  void forget(const std::string& cluster);

  // Lays the live figures over stored nodes whose GPUs they match.
  void overlay(Node& node) const;
  void overlay(std::vector<Node>& nodes) const;
  // The live utilization of a node's GPUs, or `stored` (per device, as the
  // node row has it) where none is held for that shape of the node.
  std::vector<int> live_utilization(const std::string& cluster, const std::string& name,
                                    const std::vector<int>& stored) const;

 private:
  struct ClusterEntry {
    std::optional<Held> held;
    std::string instance;
    std::int64_t seq = 0;
    std::map<std::string, NodeGpuFigures, std::less<>> nodes;
  };
  // The figures held for a node of `gpus` devices; nullptr when none are
  // held, or they are of another shape of the node (it changed since).
  const NodeGpuFigures* find_locked(const std::string& cluster, const std::string& name, std::size_t gpus) const;
  void overlay_locked(const std::string& cluster, const std::string& name, std::vector<GpuDevice>& gpus) const;

  mutable std::mutex mu_;
  std::map<std::string, ClusterEntry, std::less<>> clusters_;
};

}  // namespace cp
