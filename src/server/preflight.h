// Node preflight: how each node of a cluster differs from the others or from
// what it declares. Run by the server on every sync that reports the
// cluster's nodes; the findings are stored on the nodes (Node::drift), shown
// by `cubeplane nodes ls` and the API, and each change is an event.
//
// - kernel, runtime, driver, cuda: a node whose value differs from the one
//   most nodes of the cluster report (ties: the greatest value wins, so the
//   answer does not depend on the order of the nodes). Nodes that report
//   nothing for a fact are left out of that fact.
// - storage_mount: the cluster's storage mount is neither a mount point of
//   the node nor under one (other than "/").
// - clock_offset: the node's clock is more than 1 s off the server's.
// - gpus: the node sees fewer GPUs than its capacity declares, or than its
//   `nvidia.com/gpu.count` label says.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/types.h"

namespace cp {

inline constexpr std::int64_t kMaxClockOffsetMs = 1000;

// Drift of each node, by node name (every node has an entry, maybe empty).
std::map<std::string, std::vector<NodeDrift>> find_drift(const std::vector<Node>& nodes,
                                                         const std::string& storage_mount);

}  // namespace cp
