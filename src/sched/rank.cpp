#include "sched/rank.h"

#include "sched/feasible.h"

namespace cp::sched {

Score score_node(PlacementPolicy policy, const NodeView& node, const NodeLoad& load, const Request& request,
                 ProjectId project, LoadMode mode) {
  Wide shared = request.wants_gpus() && load.hosts_other_project(project) ? 1 : 0;
  Score s{shared, request.wants_gpus() ? free_gpus(node, load, mode) - request.gpus : 0,
          static_cast<Wide>(node.alloc_cpu) - cpu_in_use(load, mode) - request.cpu,
          static_cast<Wide>(node.alloc_memory) - memory_in_use(load, mode) - request.memory};
  if (policy == PlacementPolicy::spread) {
    for (std::size_t i = 1; i < s.size(); ++i) s[i] = -s[i];
  }
  return s;
}

}  // namespace cp::sched
