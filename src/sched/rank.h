// Stage 4a, scoring: how good a feasible node is for one more replica of the
// task. One scorer per placement policy today; soft anti-affinity between
// project groups will add a term here (Nomad's rank.go).
#pragma once

#include <array>

#include "sched/cycle_state.h"
#include "sched/request.h"

namespace cp::sched {

// Lower is better; compared lexicographically. Ties are broken by the caller
// by (cluster id, node name).
using Score = std::array<Wide, 3>;

// What is left on the node once one replica is placed there, scarcest first:
// GPUs (when the task asks for any), then cpu, then memory.
//   binpack: least left first, to keep whole GPU nodes free for big gangs;
//   spread:  most left first, to keep replicas apart.
Score score_node(PlacementPolicy policy, const NodeView& node, const NodeLoad& load, const Request& request);

}  // namespace cp::sched
