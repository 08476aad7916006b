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
    if (by_name_.contains(g.name)) continue;  // a name twice: the first one counts
    Account& a = account_for(g.name);
    a.group = &g;
    for (const auto& [resource, q] : g.quota) {
      slot(a, resource_id(resource)).limit = {true, q.guaranteed, std::max(q.guaranteed, q.max.value_or(0))};
    }
    if (!g.cohort.empty()) cohorts_[g.cohort].push_back(&a);
  }
  for (Account& a : accounts_) {
    if (a.group != nullptr && !a.group->cohort.empty()) a.cohort = &cohorts_.find(a.group->cohort)->second;
  }
  groups_ = groups.data();
  by_group_.resize(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    Account* a = by_name_.find(groups[i].name)->second;
    if (a->group == &groups[i]) by_group_[i] = a;
  }
}

const QuotaBook::Account* QuotaBook::account_of(const ResourceGroup& group) const {
  std::less<const ResourceGroup*> before;
  if (!before(&group, groups_) && before(&group, groups_ + by_group_.size())) {
    if (const Account* a = by_group_[static_cast<std::size_t>(&group - groups_)]) return a;
  }
  return account(group.name);
}

QuotaBook::Resource QuotaBook::find_resource(std::string_view name) const {
  auto it = resource_ids_.find(name);
  return {it == resource_ids_.end() ? -1 : it->second, name};
}

int QuotaBook::resource_id(std::string_view name) {
  auto it = resource_ids_.find(name);
  if (it != resource_ids_.end()) return it->second;
  const auto id = static_cast<int>(resource_names_.size());
  const std::string& kept = resource_names_.emplace_back(name);
  resource_ids_.emplace(kept, id);
  open_by_default_.push_back(kept == kCpu || kept == kMemory ? 1 : 0);
  return id;
}

Wide& QuotaBook::slot(std::vector<Wide>& v, int id) {
  auto i = static_cast<std::size_t>(id);
  if (v.size() <= i) v.resize(i + 1, 0);
  return v[i];
}

const QuotaBook::Slot& QuotaBook::slot_at(const Account& a, int id) {
  static constexpr Slot none{};
  return id >= 0 && static_cast<std::size_t>(id) < a.slots.size() ? a.slots[static_cast<std::size_t>(id)] : none;
}

QuotaBook::Slot& QuotaBook::slot(Account& a, int id) {
  auto i = static_cast<std::size_t>(id);
  if (a.slots.size() <= i) a.slots.resize(i + 1);
  return a.slots[i];
}

void QuotaBook::charge(Account& a, Wide Slot::*field, const Resources& per_replica, std::int64_t times) {
  for (const auto& [name, amount] : per_replica.amounts()) {
    slot(a, resource_id(name)).*field += static_cast<Wide>(amount) * times;
  }
}

const QuotaBook::Account* QuotaBook::account(std::string_view group) const {
  auto it = by_name_.find(group);
  return it == by_name_.end() ? nullptr : it->second;
}

QuotaBook::Account& QuotaBook::account_for(std::string_view group) {
  auto it = by_name_.find(group);
  if (it != by_name_.end()) return *it->second;
  Account& a = accounts_.emplace_back();
  a.name = std::string(group);
  by_name_.emplace(a.name, &a);
  return a;
}

std::optional<std::int64_t> QuotaBook::kept_limit(const Account& a, Resource r, std::int64_t Limit::*field) const {
  // Every name of a group's quota has an id: one without is not named.
  if (r.id < 0) return r.name == kCpu || r.name == kMemory ? std::nullopt : std::optional<std::int64_t>(0);
  auto i = static_cast<std::size_t>(r.id);
  if (i < a.slots.size() && a.slots[i].limit.named) return a.slots[i].limit.*field;
  if (open_by_default_[i]) return std::nullopt;
  return 0;
}

std::optional<std::int64_t> QuotaBook::limit_of(const Account* a, const ResourceGroup& group, Resource r) const {
  if (a == nullptr || a->group != &group) return quota_limit(group, r.name);
  return kept_limit(*a, r, &Limit::guaranteed);
}

std::optional<std::int64_t> QuotaBook::ceiling_of(const Account* a, const ResourceGroup& group, Resource r) const {
  if (a == nullptr || a->group != &group) return quota_ceiling(group, r.name);
  return kept_limit(*a, r, &Limit::ceiling);
}

const ResourceGroup* QuotaBook::group(std::string_view name) const {
  const Account* a = account(name);
  return a == nullptr ? nullptr : a->group;
}

QuotaBook::Account& QuotaBook::changing(std::string_view group) { return changing(account_for(group)); }

QuotaBook::Account& QuotaBook::changing(Account& a) {
  if (recording_ && a.saved_in != undo_epoch_) {
    a.saved_in = undo_epoch_;
    saved_.push_back({&a, a.slots, a.has_held, a.holdings.size()});
  }
  return a;
}

void QuotaBook::begin_undo() {
  ++undo_epoch_;
  worded_.clear();
  recording_ = true;
  saved_.clear();
  accounts_before_ = accounts_.size();
  kept_before_ = kept_.size();
  has_holds_before_ = has_holds_;
}

void QuotaBook::undo() {
  if (!recording_) return;
  worded_.clear();
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    Account& a = *it->account;
    a.slots = std::move(it->slots);
    a.has_held = it->has_held;
    if (a.holdings.size() != it->holdings) {
      a.holdings.resize(it->holdings);
      forget_holder_sums(a);
    }
  }
  saved_.clear();
  // Accounts first charged in the cycle (groups the snapshot does not know).
  while (accounts_.size() > accounts_before_) {
    by_name_.erase(accounts_.back().name);
    accounts_.pop_back();
  }
  while (kept_.size() > kept_before_) kept_.pop_back();
  has_holds_ = has_holds_before_;
  recording_ = false;
}

void QuotaBook::remove_kept(std::string_view group, const Resources& per_replica, std::int64_t replicas) {
  Account& a = changing(group);
  charge(a, &Slot::used, per_replica, -replicas);
  auto it = std::find_if(a.holdings.begin(), a.holdings.end(),
                         [&](const Holding& h) { return h.per_replica == &per_replica && h.replicas == replicas; });
  if (it != a.holdings.end()) {
    a.holdings.erase(it);
    forget_holder_sums(a);
    worded_.clear();
  }
}

void QuotaBook::add(std::string_view group, const Resources& per_replica, std::int64_t replicas,
                    std::string_view holder) {
  if (holder.empty()) {
    charge(changing(group), &Slot::used, per_replica, replicas);
    return;
  }
  kept_.push_back(per_replica);
  add_kept(group, kept_.back(), replicas, holder);
}

std::optional<QuotaBook::Charge> QuotaBook::resolve(std::string_view group, const Resources& per_replica) {
  auto it = by_name_.find(group);
  // Accounts of groups the book was not built with may be dropped by undo().
  if (it == by_name_.end() || it->second->group == nullptr) return std::nullopt;
  Charge out{it->second, {}};
  for (const auto& [name, amount] : per_replica.amounts()) out.amounts.emplace_back(resource_id(name), amount);
  return out;
}

void QuotaBook::add(const Charge& charge, std::int64_t replicas) {
  Account& a = changing(*charge.account);
  for (const auto& [id, amount] : charge.amounts) slot(a, id).used += static_cast<Wide>(amount) * replicas;
}

void QuotaBook::add(std::string_view group, const Tally& used) {
  Account& a = changing(group);
  for (const auto& [name, amount] : used.amounts()) slot(a, resource_id(name)).used += amount;
}

void QuotaBook::add_kept(std::string_view group, const Resources& per_replica, std::int64_t replicas,
                         std::string_view holder) {
  Account& a = changing(group);
  if (holder.empty()) {
    charge(a, &Slot::used, per_replica, replicas);
    return;
  }
  // Each name looked up once: charged, counted, and kept with the holding.
  Holding& held = a.holdings.emplace_back(Holding{holder, &per_replica, replicas, {}});
  for (const auto& [name, amount] : per_replica.amounts()) {
    const int id = resource_id(name);
    slot(a, id).used += static_cast<Wide>(amount) * replicas;
    held.amounts.emplace_back(id, amount);
    if (amount != 0 && replicas != 0) ++slot(a.holdings_of, id);
  }
}

void QuotaBook::hold(std::string_view group, const Resources& per_replica, std::int64_t replicas) {
  Account& a = changing(group);
  charge(a, &Slot::held, per_replica, replicas);
  a.has_held = true;
  has_holds_ = true;
}

Wide QuotaBook::in_use(const Account* a, Resource r, bool count_held) {
  if (a == nullptr) return 0;
  const Slot& s = slot_at(*a, r.id);
  Wide n = s.used;
  if (count_held && a->has_held) n += s.held;
  return n;
}

reasons::NamedAmountsView QuotaBook::top_holders(const Account* a, Resource r) const {
  if (a == nullptr || a->holdings.empty() || r.id < 0) return {};
  // A group's holders are a few project groups: a flat list, kept sorted by
  // name (the order the stable sort below starts from).
  auto& sums = a->holder_sums;
  for (; a->summed < a->holdings.size(); ++a->summed) {
    const Holding& held = a->holdings[a->summed];
    auto it = std::lower_bound(sums.begin(), sums.end(), held.holder,
                               [](const auto& s, std::string_view h) { return s.first < h; });
    if (it == sums.end() || it->first != held.holder) it = sums.insert(it, {held.holder, {}});
    for (const auto& [id, amount] : held.amounts) slot(it->second, id) += static_cast<Wide>(amount) * held.replicas;
  }
  auto cached = std::find_if(a->top_holders.begin(), a->top_holders.end(),
                             [&](const Account::TopHolders& t) { return t.resource == r.id; });
  if (cached == a->top_holders.end()) {
    cached = a->top_holders.insert(a->top_holders.end(), {r.id, 0, {}});
  } else if (cached->summed == a->summed) {
    return cached->top;
  }
  reasons::NamedAmounts& out = cached->top;
  out.clear();
  cached->summed = a->summed;
  for (const auto& [holder, amounts] : sums) {
    Wide amount = at(amounts, r.id);
    if (amount > 0) out.emplace_back(holder, narrow(amount));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (out.size() > 3) out.resize(3);
  return out;
}

void QuotaBook::forget_holder_sums(Account& a) {
  a.holder_sums.clear();
  a.summed = 0;
  a.top_holders.clear();
}

Wide QuotaBook::borrowed(std::string_view name, std::string_view resource) const {
  return borrowed(account(name), find_resource(resource));
}

void QuotaBook::borrowed_resources(std::string_view group, std::vector<std::string_view>& out) const {
  const Account* a = account(group);
  if (a == nullptr || a->group == nullptr) return;
  // Every resource the account has a slot for (none is held past them).
  for (std::size_t i = 0; i < a->slots.size(); ++i) {
    const Resource r{static_cast<int>(i), resource_names_[i]};
    if (borrowed(a, r) > 0) out.push_back(r.name);
  }
}

Wide QuotaBook::borrowed(const Account* a, Resource r) const {
  if (a == nullptr || a->group == nullptr) return 0;
  auto limit = limit_of(a, *a->group, r);
  if (!limit) return 0;
  Wide over = slot_at(*a, r.id).used - *limit;
  return over > 0 ? over : 0;
}

bool QuotaBook::above_guarantee(const Account& a, std::string_view resource, Wide amount, int replicas) const {
  const Resource r = find_resource(resource);
  auto limit = limit_of(&a, *a.group, r);
  return limit && slot_at(a, r.id).used + amount * replicas > *limit;
}

std::vector<std::string> QuotaBook::would_borrow(std::string_view name, const Resources& per_replica,
                                                 int replicas) const {
  std::vector<std::string> out;
  const Account* a = account(name);
  if (a == nullptr || a->group == nullptr) return out;
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (above_guarantee(*a, resource, amount, replicas)) out.push_back(resource);
  }
  return out;
}

bool QuotaBook::borrows(const ResourceGroup& group, const Resources& per_replica, int replicas) const {
  const Account* a = account_of(group);
  if (a == nullptr || a->group == nullptr) return false;
  return std::any_of(per_replica.amounts().begin(), per_replica.amounts().end(), [&](const auto& entry) {
    return above_guarantee(*a, entry.first, entry.second, replicas);
  });
}

const std::vector<QuotaBook::Account*>* QuotaBook::cohort_members(const Account* a,
                                                                 const ResourceGroup& group) const {
  if (group.cohort.empty()) return nullptr;
  if (a != nullptr && a->group == &group) return a->cohort;
  auto it = cohorts_.find(group.cohort);
  return it == cohorts_.end() ? nullptr : &it->second;
}

QuotaBook::CohortSums QuotaBook::cohort_sums(const Account* a, const ResourceGroup& group, Resource r,
                                             bool count_held) const {
  CohortSums sums;
  const std::vector<Account*>* members = cohort_members(a, group);
  if (members == nullptr) return sums;
  for (const Account* m : *members) {
    auto limit = limit_of(m, *m->group, r);
    if (!limit) continue;  // a member that does not limit it neither lends nor counts
    sums.guaranteed += *limit;
    sums.used += in_use(m, r, count_held);
  }
  return sums;
}

bool QuotaBook::could_ever_fit(const ResourceGroup& group, const Resources& per_replica, int replicas,
                               bool may_borrow) const {
  const Account* a = account_of(group);
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny) continue;
    const Resource r = find_resource(resource);
    auto limit = may_borrow ? ceiling_of(a, group, r) : limit_of(a, group, r);
    if (limit && static_cast<Wide>(amount) * replicas > *limit) return false;
  }
  return true;
}

bool QuotaBook::fits(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
                     bool count_held) const {
  const Account* a = account_of(group);
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (!fits_one(a, group, resource, amount, replicas, may_borrow, count_held)) return false;
  }
  return true;
}

bool QuotaBook::admits(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
                       bool count_held, std::vector<Reasons::Shared>* refused) const {
  if (refused == nullptr) return fits(group, per_replica, replicas, may_borrow, count_held);
  *refused = refusals(group, per_replica, replicas, may_borrow, count_held);
  return refused->empty();
}

bool QuotaBook::fits(const ResourceGroup& group, std::string_view resource, std::int64_t amount, int replicas,
                     bool may_borrow, bool count_held) const {
  return fits_one(account_of(group), group, resource, amount, replicas, may_borrow, count_held);
}

bool QuotaBook::fits_one(const Account* a, const ResourceGroup& group, std::string_view resource,
                         std::int64_t amount, int replicas, bool may_borrow, bool count_held) const {
  if (resource == kGpuAny || amount == 0) return true;
  const Resource r = find_resource(resource);
  auto guaranteed = limit_of(a, group, r);
  if (!guaranteed) return true;
  Wide requested = static_cast<Wide>(amount) * replicas;
  Wide mine = in_use(a, r, count_held);
  if (mine + requested <= *guaranteed) return true;
  if (!may_borrow || group.cohort.empty()) return false;
  auto ceiling = ceiling_of(a, group, r);
  if (!ceiling || mine + requested > *ceiling) return false;
  CohortSums sums = cohort_sums(a, group, r, count_held);
  return requested <= sums.guaranteed - sums.used;
}

template <class F>
void QuotaBook::each_refusal(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
                             bool count_held, F&& refused) const {
  const Account* a = account_of(group);
  reasons::NamedAmounts borrowers;
  for (const auto& [resource, amount] : per_replica.amounts()) {
    if (resource == kGpuAny || amount == 0) continue;
    const Resource r = find_resource(resource);
    auto guaranteed = limit_of(a, group, r);
    if (!guaranteed) continue;
    Wide requested = static_cast<Wide>(amount) * replicas;
    Wide in_use = QuotaBook::in_use(a, r, count_held);
    if (in_use + requested <= *guaranteed) continue;

    reasons::QuotaFigures f;
    borrowers.clear();
    f.resource_group = group.name;
    f.resource = resource;
    f.used = narrow(in_use);
    f.requested = narrow(requested);
    f.guaranteed = *guaranteed;
    f.limit = *guaranteed;
    auto ceiling = ceiling_of(a, group, r);
    bool cohort = !group.cohort.empty() && ceiling && *ceiling > *guaranteed;
    if (cohort) {
      CohortSums sums = cohort_sums(a, group, r, count_held);
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
      const std::vector<Account*>* members = cohort_members(a, group);
      if (members != nullptr) {
        for (const Account* m : *members) {
          if (m == a) continue;  // the group itself (its account, or none)
          Wide over = borrowed(m, r);
          if (over > 0) borrowers.emplace_back(m->name, narrow(over));
        }
      }
      std::stable_sort(borrowers.begin(), borrowers.end(),
                       [](const auto& x, const auto& y) { return x.second > y.second; });
      f.borrowers = borrowers;
    }
    refused(f, a, r);
  }
}

std::vector<PendingReason> QuotaBook::check(const ResourceGroup& group, const Resources& per_replica, int replicas,
                                            bool may_borrow, bool count_held) const {
  std::vector<PendingReason> out;
  each_refusal(group, per_replica, replicas, may_borrow, count_held,
               [&](reasons::QuotaFigures& f, const Account* a, Resource r) {
                 f.holders = top_holders(a, r);
                 out.push_back(reasons::quota(f));
               });
  return out;
}

namespace {

// Each string with its length first, so that the key reads back one way only.
void append_text(std::string& k, std::string_view text) {
  append_bytes(k, text.size());
  k.append(text);
}

}  // namespace

std::vector<Reasons::Shared> QuotaBook::refusals(const ResourceGroup& group, const Resources& per_replica,
                                                 int replicas, bool may_borrow, bool count_held) const {
  std::vector<Reasons::Shared> out;
  each_refusal(group, per_replica, replicas, may_borrow, count_held,
               [&](reasons::QuotaFigures& f, const Account* a, Resource r) {
                 // Every figure reasons::quota reads. The account stands for
                 // the group (and its cohort) and, with how many of its
                 // holdings hold the resource, for its top holders: holdings
                 // are only added between two clears of worded_ (begin_undo,
                 // undo, remove_kept), so the holders are worked out only for
                 // a refusal worded anew.
                 struct Figures {  // no padding (append_bytes checks): the key is its bytes
                   const Account* account;
                   std::int64_t holdings;
                   std::int64_t used, requested, guaranteed, limit, ceiling, cohort_idle;
                   std::int32_t resource;
                   char may_borrow, pad[3];
                 };
                 std::string& k = key_;
                 k.clear();
                 const std::int64_t holdings = a != nullptr ? narrow(at(a->holdings_of, r.id)) : 0;
                 append_bytes(k, Figures{a, holdings, f.used, f.requested, f.guaranteed, f.limit, f.ceiling,
                                         f.cohort_idle, r.id, f.may_borrow ? 'b' : '-', {}});
                 if (a == nullptr) append_text(k, f.resource_group);
                 if (r.id < 0) append_text(k, f.resource);
                 append_bytes(k, f.borrowers.size());
                 for (const auto& [name, amount] : f.borrowers) {
                   append_text(k, name);
                   append_bytes(k, amount);
                 }
                 auto [it, added] = worded_.try_emplace(k);
                 if (added) {
                   f.holders = top_holders(a, r);
                   it->second = reasons::quota_refusal(f);
                 }
                 out.push_back(it->second);
               });
  return out;
}

}  // namespace cp::sched
