// Nodes in the order of what they have free, per cluster and GPU type, so
// that a one-replica task finds its best node by walking from the first node
// with room enough and stopping at the first that passes every filter,
// instead of scoring every node of its clusters (CycleState::best_single).
//
// The order is the score's (rank.h) for one replica: free GPUs, then cpu,
// then memory, then node index; binpack walks it up, spread down. The soft
// anti-affinity part of the score (another project's GPU work on the node)
// comes first in the score, so nodes whose GPU work is of at most one
// project are also kept in an order of their own, with that project.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sched/cycle_state.h"

namespace cp::sched {

class FreeOrder {
 public:
  // The node holds GPU work of several projects (a holder for Entry::holder).
  static constexpr ProjectId kSeveral = -2;

  // 32 bytes: an order is walked and shifted on every change of a node, so
  // its entries are kept small. Figures past 64 bits (no real node has them)
  // are cut to its bounds: such a node only ties with others, broken by index.
  struct Entry {
    std::int64_t first = 0;  // GPU orders: free GPUs, cpu, memory; the cpu order: cpu, memory, 0
    std::int64_t second = 0;
    std::int64_t third = 0;
    std::uint32_t node = 0;
    ProjectId holder = kNoProject;  // the one project with GPU work here, kNoProject, or kSeveral

    bool operator<(const Entry& o) const {
      if (first != o.first) return first < o.first;
      if (second != o.second) return second < o.second;
      if (third != o.third) return third < o.third;
      return node < o.node;
    }
    bool same_key(const Entry& o) const { return first == o.first && second == o.second && third == o.third; }
  };

  // Every node of `nodes` (each with its cluster_rank) and its load;
  // `types`: GPU type ids below this are ordered (at most 64).
  FreeOrder(const std::vector<NodeView>& nodes, const std::vector<NodeLoad>& loads, std::size_t clusters,
            std::size_t types);
  // No node yet, of `nodes` nodes at most, each ordered by what it has free
  // as `mode` counts it: the held nodes without their holds (add, remove).
  FreeOrder(std::size_t nodes, std::size_t clusters, std::size_t types, LoadMode mode);
  // The node's load or view changed (a node in the order).
  void update(std::size_t node, const NodeView& view, const NodeLoad& load);
  // Puts the node in the order (or updates it there), or takes it out.
  void add(std::size_t node, const NodeView& view, const NodeLoad& load);
  void remove(std::size_t node, const NodeView& view);
  void clear();

  // Nodes of the cluster that offer the type; of those, the ones whose GPU
  // work is of one project or none; every node of the cluster (cpu order).
  const std::vector<Entry>& offering(std::size_t cluster, int type) const { return all_[cluster * types_ + type]; }
  const std::vector<Entry>& single(std::size_t cluster, int type) const { return single_[cluster * types_ + type]; }
  const std::vector<Entry>& cpu(std::size_t cluster) const { return cpu_[cluster]; }
  std::size_t types() const { return types_; }
  // Every node with GPUs is in the order of some type (none has only types
  // past the ordered ones), so the GPU orders together hold every node a
  // gpu/any request could use.
  bool orders_every_gpu_node() const { return every_gpu_node_; }

 private:
  struct Placed {
    Entry gpu;  // as in the GPU orders
    Entry cpu;  // as in the cpu order
    bool single = false;
  };
  Placed placed_of(std::size_t node, const NodeView& view, const NodeLoad& load) const;
  // Adds `p` to (or removes it from) every order the node is in.
  void file(std::size_t node, const NodeView& view, const Placed& p, bool add);

  std::size_t types_;
  LoadMode mode_ = LoadMode::kAll;  // how a node's free is counted
  bool every_gpu_node_ = true;
  std::vector<char> member_;  // per node: in the order (built with every node: all)
  std::vector<std::vector<Entry>> all_;     // [cluster * types_ + type], sorted
  std::vector<std::vector<Entry>> single_;  // the same, holder != kSeveral
  std::vector<std::vector<Entry>> cpu_;     // [cluster], sorted
  std::vector<Placed> placed_;              // per node, as it is in the orders now
  std::vector<std::uint64_t> bits_;         // per node, the type bits it is ordered under
};

}  // namespace cp::sched
