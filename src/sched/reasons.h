// Stage 5, explanation: the PendingReasons a task is left with, each with an
// English and a Chinese sentence that carry the figures, and the same figures
// as details for the API and UI. All wording lives here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sched/feasible.h"

namespace cp::sched::reasons {

// "waiting for 2 upstream tasks: prepare, fetch"; details {tasks}.
PendingReason dependencies(const std::vector<std::string>& task_ids);

// details {resource_group}.
PendingReason unknown_group(std::string_view group);

// "quota: gpu/nvidia-a100-80gb 8 of 8 in use by rg-proj-b, this task asks for 2";
// details {resource, used, requested, limit, resource_group}.
PendingReason quota(std::string_view group, std::string_view resource, std::int64_t used, std::int64_t requested,
                    std::int64_t limit);

// "cluster c1 offline: credential_expired (...)"; details {cluster, state,
// state_reason, state_message}. `cluster` null: named by the group, never registered.
PendingReason cluster_offline(std::string_view id, const Cluster* cluster);

// The pinned cluster is not one of the group's; details {cluster, resource_group, clusters}.
PendingReason pinned_outside_group(std::string_view pinned, std::string_view group,
                                   const std::vector<std::string>& group_clusters);

// Every cluster of the group dropped by the pin or the cluster selector;
// details {resource_group, clusters_total, not_pinned, selector_mismatch, offline}.
PendingReason no_cluster(std::string_view group, std::string_view pinned, const Labels& selector,
                         const ClusterCounts& counts);

// "no node fits: 12 nodes; 3 in maintenance, 9 lack gpu-type=nvidia-a100-80gb";
// details {nodes_total, <one key per NodeMisfit>, nodes_fit, replicas, clusters}.
PendingReason no_node(const NodeCounts& counts, const Request& request, const ResourceGroup& group,
                      const std::vector<std::string>& clusters);

// Request validation failed (Error from request_of()).
PendingReason invalid_request(const Error& error);

}  // namespace cp::sched::reasons
