// Stage 4a, scoring: how good a feasible node is for one more replica of the
// task (Nomad's rank.go).
#pragma once

#include <array>
#include <string_view>

#include "sched/cycle_state.h"
#include "sched/request.h"

namespace cp::sched {

// Lower is better; compared lexicographically. Ties are broken by the caller
// by (cluster id, node name).
using Score = std::array<Wide, 4>;

// 1. Soft anti-affinity, for GPU work only: a node where another project
//    group runs GPU work comes after every node where none does. Teams that
//    share a GPU node share its PCIe/NVLink, host memory and noisy
//    neighbours; when there is a choice, they are kept apart.
// 2. What is left on the node once the replica is placed, scarcest first:
//    GPUs (when the task asks for any), then cpu, then memory.
//      binpack: least left first, to keep whole GPU nodes free for big gangs;
//      spread:  most left first, to keep replicas apart.
Score score_node(PlacementPolicy policy, const NodeView& node, const NodeLoad& load, const Request& request,
                 ProjectId project, LoadMode mode = LoadMode::kAll);

}  // namespace cp::sched
