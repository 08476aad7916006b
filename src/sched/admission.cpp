#include "sched/admission.h"

#include <algorithm>

#include "sched/reasons.h"
#include "sched/scheduler.h"

namespace cp::sched {

std::optional<std::int64_t> quota_limit(const ResourceGroup& group, std::string_view resource) {
  auto it = group.quota.find(std::string(resource));
  if (it != group.quota.end()) return it->second.guaranteed;
  if (resource == kCpu || resource == kMemory) return std::nullopt;
  return 0;
}

std::optional<std::int64_t> quota_ceiling(const ResourceGroup& group, std::string_view resource) {
  auto it = group.quota.find(std::string(resource));
  if (it != group.quota.end()) return std::max(it->second.guaranteed, it->second.max.value_or(0));
  return quota_limit(group, resource);
}

QuotaBook::QuotaBook(const std::vector<ResourceGroup>& groups) {
  for (const auto& g : groups) {
    if (!groups_.emplace(g.name, &g).second) continue;  // a name twice: the first one counts
    if (!g.cohort.empty()) cohorts_[g.cohort].push_back(&g);
  }
}

const ResourceGroup* QuotaBook::group(std::string_view name) const {
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second;
}

void QuotaBook::add(std::string_view group, const Resources& per_replica, std::int64_t replicas,
                    std::string_view holder) {
  if (holder.empty()) {
    auto it = used_.find(group);
    if (it == used_.end()) it = used_.emplace(std::string(group), Tally{}).first;
    it->second.add(per_replica, replicas);
    return;
  }
  kept_.push_back(per_replica);
  add_kept(group, kept_.back(), replicas, holder);
}

void QuotaBook::add_kept(std::string_view group, const Resources& per_replica, std::int64_t replicas,
                         std::string_view holder) {
  auto it = used_.find(group);
  if (it == used_.end()) it = used_.emplace(std::string(group), Tally{}).first;
  it->second.add(per_replica, replicas);
  if (holder.empty()) return;
  auto h = holdings_.find(group);
  if (h == holdings_.end()) h = holdings_.emplace(std::string(group), std::vector<Holding>{}).first;
  h->second.push_back({holder, &per_replica, replicas});
}

void QuotaBook::hold(std::string_view group, const Resources& per_replica, std::int64_t replicas) {
  auto it = held_.find(group);
  if (it == held_.end()) it = held_.emplace(std::string(group), Tally{}).first;
  it->second.add(per_replica, replicas);
}

Wide QuotaBook::in_use(std::string_view group, std::string_view resource, bool count_held) const {
  Wide n = used(group).get(resource);
  if (count_held) {
    if (auto it = held_.find(group); it != held_.end()) n += it->second.get(resource);
  }
  return n;
}

std::vector<std::pair<std::string, std::int64_t>> QuotaBook::top_holders(std::string_view group,
                                                                       std::string_view resource) const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto h = holdings_.find(group);
  if (h == holdings_.end()) return out;
  std::map<std::string_view, Wide> sums;
  for (const auto& held : h->second) sums[held.holder] += static_cast<Wide>(held.per_replica->get(resource)) * held.replicas;
  for (const auto& [holder, amount] : sums) {
    if (amount > 0) out.emplace_back(std::string(holder), narrow(amount));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > 3) out.resize(3);
  return out;
}

const Tally& QuotaBook::used(std::string_view group) const {
  auto it = used_.find(group);
  return it == used_.end() ? empty_ : it->second;
}

Wide QuotaBook::borrowed(std::string_view name, std::string_view resource) const {
  const ResourceGroup* g = group(name);
  if (g == nullptr) return 0;
  auto limit = quota_limit(*g, resource);
  if (!limit) return 0;
  Wide over = used(name).get(resource) - *limit;
  return over > 0 ? over : 0;
}

std::vector<std::string> QuotaBook::would_borrow(std::string_view name, const Resources& per_replica,
                                                 int replicas) const {
  std::vector<std::string> out;
  const ResourceGroup* g = group(name);
  if (g == nullptr) return out;
  for (const auto& [resource, amount] : per_replica.amounts()) {
    auto limit = quota_limit(*g, resource);
    if (limit && used(name).get(resource) + static_cast<Wide>(amount) * replicas > *limit) out.push_back(resource);
  }
  return out;
}

QuotaBook::CohortSums QuotaBook::cohort_sums(const ResourceGroup& group, std::string_view resource,
                                             bool count_held) const {
  CohortSums sums;
  auto it = cohorts_.find(group.cohort);
  if (group.cohort.empty() || it == cohorts_.end()) return sums;
  for (const ResourceGroup* m : it->second) {
    auto limit = quota_limit(*m, resource);
    if (!limit) continue;  // a member that does not limit it neither lends nor counts
    sums.guaranteed += *limit;
    sums.used += in_use(m->name, resource, count_held);
  }
  return sums;
}

bool QuotaBook::could_ever_fit(const ResourceGroup& group, const Resources& per_replica, int replicas,
                               bool may_borrow) const {
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny) continue;
    auto limit = may_borrow ? quota_ceiling(group, resource) : quota_limit(group, resource);
    if (limit && static_cast<Wide>(amount) * replicas > *limit) return false;
  }
  return true;
}

bool QuotaBook::fits(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
                     bool count_held) const {
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny || amount == 0) continue;
    auto guaranteed = quota_limit(group, resource);
    if (!guaranteed) continue;
    Wide requested = static_cast<Wide>(amount) * replicas;
    Wide mine = in_use(group.name, resource, count_held);
    if (mine + requested <= *guaranteed) continue;
    if (!may_borrow || group.cohort.empty()) return false;
    auto ceiling = quota_ceiling(group, resource);
    if (!ceiling || mine + requested > *ceiling) return false;
    CohortSums sums = cohort_sums(group, resource, count_held);
    if (requested > sums.guaranteed - sums.used) return false;
  }
  return true;
}

std::vector<PendingReason> QuotaBook::check(const ResourceGroup& group, const Resources& per_replica, int replicas,
                                            bool may_borrow, bool count_held) const {
  std::vector<PendingReason> out;
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny || amount == 0) continue;
    auto guaranteed = quota_limit(group, resource);
    if (!guaranteed) continue;
    Wide requested = static_cast<Wide>(amount) * replicas;
    Wide in_use = this->in_use(group.name, resource, count_held);
    if (in_use + requested <= *guaranteed) continue;

    reasons::QuotaFigures f;
    f.resource_group = group.name;
    f.resource = resource;
    f.used = narrow(in_use);
    f.requested = narrow(requested);
    f.guaranteed = *guaranteed;
    f.limit = *guaranteed;
    f.holders = top_holders(group.name, resource);
    auto ceiling = quota_ceiling(group, resource);
    bool cohort = !group.cohort.empty() && ceiling && *ceiling > *guaranteed;
    if (cohort) {
      CohortSums sums = cohort_sums(group, resource, count_held);
      Wide idle = sums.guaranteed - sums.used;  // what the cohort leaves unused, all members together
      f.cohort = group.cohort;
      f.ceiling = *ceiling;
      f.cohort_idle = narrow(std::max<Wide>(idle, 0));
      f.may_borrow = may_borrow;
      if (may_borrow) {
        Wide reachable = std::min<Wide>(*ceiling, in_use + std::max<Wide>(idle, 0));
        f.limit = narrow(std::max<Wide>(reachable, *guaranteed));
        if (in_use + requested <= *ceiling && requested <= idle) continue;
      }
      auto members = cohorts_.find(group.cohort);
      for (const ResourceGroup* m : members == cohorts_.end() ? std::vector<const ResourceGroup*>{} : members->second) {
        if (m->name == group.name) continue;
        Wide over = borrowed(m->name, resource);
        if (over > 0) f.borrowers.emplace_back(m->name, narrow(over));
      }
      std::stable_sort(f.borrowers.begin(), f.borrowers.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
    }
    out.push_back(reasons::quota(f));
  }
  return out;
}

}  // namespace cp::sched
