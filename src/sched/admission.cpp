#include "sched/admission.h"

#include "sched/reasons.h"

namespace cp::sched {

std::optional<std::int64_t> quota_limit(const ResourceGroup& group, std::string_view resource) {
  auto it = group.quota.find(std::string(resource));
  if (it != group.quota.end()) return it->second.guaranteed;
  if (resource == kCpu || resource == kMemory) return std::nullopt;
  return 0;
}

std::vector<PendingReason> check_quota(const ResourceGroup& group, const Tally& used, const Resources& per_replica,
                                       int replicas) {
  std::vector<PendingReason> out;
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny) continue;
    auto limit = quota_limit(group, resource);
    if (!limit) continue;
    Wide requested = static_cast<Wide>(amount) * replicas;
    Wide in_use = used.get(resource);
    if (in_use + requested <= *limit) continue;
    out.push_back(reasons::quota(group.name, resource, narrow(in_use), narrow(requested), *limit));
  }
  return out;
}

}  // namespace cp::sched
