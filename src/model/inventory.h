// What of a cluster's inventory goes into a sync (the agent protocol,
// DESIGN.md "Agent protocol"). A fleet's nodes rarely change, but their GPU
// figures move at every read: sending every node at every sync made a sync
// of 100 nodes a 177 KB body that the server decoded and compared in full
// (docs/benchmarks.md, "Agent sync load"). So the agent sends its nodes when
// they changed, when the server asks, and every `full_every_ms`; otherwise
// their fingerprint and the GPU figures that moved since the server last
// took them.
//
// Pure: the agent (and the load generator in bench/agents) call it with
// their clock's time; nothing here does I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/protocol.h"

namespace cp {

// Fingerprint of an inventory with the live GPU figures (utilization, memory
// used) left out: equal for two reads that differ only in those.
std::string inventory_fingerprint(const std::vector<NodeReport>& nodes);

// The live figures of a node's GPUs.
NodeGpuFigures gpu_figures_of(const NodeReport& node);

class InventoryReporter {
 public:
  explicit InventoryReporter(Millis full_every_ms = 10 * 60 * 1000) : full_every_ms_(full_every_ms) {}

  // Puts `nodes` (the latest read) into `req`: either all of them, or
  // nodes_unchanged with the figures that moved since the last answered sync.
  // `fingerprint` is inventory_fingerprint(nodes), computed once per read.
  void fill(SyncRequest& req, const std::vector<NodeReport>& nodes, const std::string& fingerprint, Millis now);

  // The server answered the request `fill` filled last (a 2xx): what it sent
  // is what the server holds, unless the answer asks for the inventory. A
  // request that failed needs no call: the next one sends its news again.
  void answered(const SyncResponse& resp);

  // The next sync sends every node (a new credential, a new server).
  void reset() { held_.clear(); }

 private:
  Millis full_every_ms_;
  std::string held_;  // fingerprint of the inventory the server holds; "" unknown
  Millis held_at_ = 0;
  std::map<std::string, NodeGpuFigures> figures_;  // as the server holds them

  // What the request in flight carried.
  bool sent_full_ = false;
  std::string sent_fingerprint_;
  Millis sent_at_ = 0;
  std::vector<NodeGpuFigures> sent_figures_;
};

}  // namespace cp
