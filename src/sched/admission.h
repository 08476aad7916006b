// Stage 2, admission: does the request fit the resource group's quota?
// v1 admits within the guaranteed quota only. The ceiling comes from one
// function, quota_limit(), so that borrowing from a cohort (the next issue)
// changes that function and not its callers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sched/cycle_state.h"

namespace cp::sched {

// The most of `resource` the group may hold in total, or nullopt when the
// group does not limit it:
//   - named in the quota: its guaranteed amount (v1: no borrowing);
//   - not named, cpu or memory: not limited (a GPU group often sets only GPUs);
//   - not named, anything else (every "gpu/<type>" above all): 0. A GPU type
//     is never granted by omission.
std::optional<std::int64_t> quota_limit(const ResourceGroup& group, std::string_view resource);

// One kReasonQuota reason per resource of `per_replica` x `replicas` that
// would take the group past its limit, given what it holds (`used`). Empty:
// admitted. "gpu/any" is skipped: it is checked once the type is known.
std::vector<PendingReason> check_quota(const ResourceGroup& group, const Tally& used, const Resources& per_replica,
                                       int replicas);

}  // namespace cp::sched
