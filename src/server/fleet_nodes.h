// The fleet's nodes as the background passes (fleet samples, alert rules)
// read them every 15 s. Decoding every node row of a large fleet on each
// pass was most of an idle server's CPU: at 1,000 clusters of 100 nodes,
// 200,000 node documents every 15 s, about 28 % of a core with the agents
// nearly silent (docs/benchmarks.md, "Agent sync load"). Nodes change
// rarely, so this keeps what the passes need of each cluster's nodes
// (NodeSummary) and reads a cluster again only after a commit that wrote its
// nodes said so (changed()).
//
// Why a read never keeps stale rows (the passes read in a read transaction,
// whose snapshot starts when it opens):
//
//   writer: commit nodes of c ──► changed(c): gen[c]++
//   reader: marks() (copies gen) ──► open read tx ──► visit(): c is read
//           again when its cached gen differs from the marked one
//
// A reader that marked gen[c] after the bump opened its snapshot after the
// commit: fresh rows. One that marked it before keeps what it read under
// the old gen, which the bump makes stale for the next pass. Only this
// server writes nodes (one server per store); each cluster is still read
// again every `refresh_every` passes, staggered, for anything written
// behind its back (a restored database).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "model/types.h"
#include "store/store.h"

namespace cp {

// What the passes need of a node: a few fields, not its document (a
// decoded Node is about 4 KB; 100,000 of them held 400 MB).
struct NodeSummary {
  std::string cluster_id;
  std::string name;
  bool ready = true;
  bool in_maintenance = false;
  std::string not_ready_reason;
  std::int64_t gpus_total = 0;        // capacity
  std::vector<int> gpu_utilization;   // per device as stored; -1 not measured
  static NodeSummary of(const Node& n);
};

class FleetNodes {
 public:
  explicit FleetNodes(int refresh_every = 40) : refresh_every_(refresh_every < 1 ? 1 : refresh_every) {}

  // After a commit that wrote nodes of `cluster` (reported, patched, deleted).
  void changed(const std::string& cluster);

  // What has been written so far; take it before opening the read transaction.
  using Marks = std::map<std::string, std::uint64_t, std::less<>>;
  Marks marks() const;
  // A cluster's generation in `marks` (0: its nodes were never written).
  static std::uint64_t gen_of(const Marks& marks, std::string_view cluster);

  // Every node of `clusters` (listed in the same transaction `tx`), by
  // cluster in the order given, then by name. Passes that visit at once
  // take turns.
  Status visit(Tx& tx, const Marks& marks, const std::vector<Cluster>& clusters,
               const std::function<void(const NodeSummary&)>& fn);

  // Clusters read from the store (not from memory) so far: for tests.
  std::int64_t clusters_read() const;

 private:
  struct Entry {
    std::uint64_t gen = 0;
    int passes = 0;  // visits since it was read (less a stagger after the first read)
    std::vector<NodeSummary> nodes;
  };

  const int refresh_every_;
  mutable std::mutex gen_mu_;
  Marks gens_;
  mutable std::mutex cache_mu_;  // held through a visit
  std::map<std::string, Entry, std::less<>> cache_;
  std::int64_t clusters_read_ = 0;
};

}  // namespace cp
