#include "sched/rank.h"

#include "sched/feasible.h"

namespace cp::sched {

Score score_node(PlacementPolicy policy, const NodeView& node, const NodeLoad& load, const Request& request) {
  const Resources& alloc = node.node->allocatable;
  auto left = [&](std::string_view name) {
    return static_cast<Wide>(alloc.get(name)) - load.used.get(name) - request.per_replica.get(name);
  };
  Score s{request.wants_gpus() ? free_gpus(node, load) - request.gpus : 0, left(kCpu), left(kMemory)};
  if (policy == PlacementPolicy::spread) {
    for (auto& v : s) v = -v;
  }
  return s;
}

}  // namespace cp::sched
