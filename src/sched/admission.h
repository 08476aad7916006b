// Stage 2, admission: does the request fit the resource group's quota?
//
// A group is guaranteed `guaranteed` of each resource its quota names. Groups
// that share a cohort lend each other what they leave idle: a group may hold
// more than its guarantee, up to its own `max`, while the cohort as a whole
// stays within the sum of its members' guarantees. What a group holds above
// its guarantee is borrowed, and the lenders may take it back (reclaim, in
// preempt.h). Work whose priority class is not preemptible never borrows:
// borrowed capacity must be reclaimable.
//
// QuotaBook is the one rule: decide() charges it as it places, and the server
// re-checks a plan against a book built from the store.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "common/string_hash.h"
#include "model/types.h"
#include "sched/scheduler.h"
#include "sched/tally.h"

namespace cp::sched {

// The guaranteed amount of `resource` for the group, or nullopt when the group
// does not limit it:
//   - named in the quota: its guaranteed amount;
//   - not named, cpu or memory: not limited (a GPU group often sets only GPUs);
//   - not named, anything else (every "gpu/<type>" above all): 0. A GPU type
//     is never granted by omission.
std::optional<std::int64_t> quota_limit(const ResourceGroup& group, std::string_view resource);
// The most the group may hold by borrowing: `max` where set, else the guarantee
// (nullopt: not limited, as for quota_limit).
std::optional<std::int64_t> quota_ceiling(const ResourceGroup& group, std::string_view resource);

class QuotaBook {
 public:
  // Groups are referenced, not copied: they must outlive the book.
  explicit QuotaBook(const std::vector<ResourceGroup>& groups);
  // Its index points into itself: moved (nothing moves in a deque), never copied.
  QuotaBook(const QuotaBook&) = delete;
  QuotaBook& operator=(const QuotaBook&) = delete;
  QuotaBook(QuotaBook&&) = default;
  QuotaBook& operator=(QuotaBook&&) = default;

  const ResourceGroup* group(std::string_view name) const;
  // Charges per_replica x replicas to the group (negative replicas release).
  // `holder` (a project group; the caller keeps the string alive) is
  // remembered to say who holds a resource.
  void add(std::string_view group, const Resources& per_replica, std::int64_t replicas = 1,
           std::string_view holder = {});
  // The same for `per_replica` that outlives the book (the snapshot's): not copied.
  void add_kept(std::string_view group, const Resources& per_replica, std::int64_t replicas, std::string_view holder);
  // Takes back one add_kept() of the same `per_replica` (running work gone:
  // a Scheduler's delta).
  void remove_kept(std::string_view group, const Resources& per_replica, std::int64_t replicas);
  // Charges amounts already summed over many works (no holder).
  void add(std::string_view group, const Tally& used);

 private:
  struct Account;

 public:
  // per_replica of one of the book's groups, resolved once (the account,
  // resource ids, amounts) for work that victim searches take out and put
  // back many times. Stays valid as long as the book.
  struct Charge {
    Account* account = nullptr;
    std::vector<std::pair<int, std::int64_t>> amounts;
  };
  // nullopt: not a group the book was built with (charge it by name).
  std::optional<Charge> resolve(std::string_view group, const Resources& per_replica);
  // add(group, per_replica, replicas) for the resolved charge.
  void add(const Charge& charge, std::int64_t replicas);
  // Quota held for a blocked task of the group (a reservation): counted by
  // check() unless told otherwise, never by used().
  void hold(std::string_view group, const Resources& per_replica, std::int64_t replicas);
  bool has_holds() const { return has_holds_; }

  // Everything charged or held from begin_undo() on is taken back by undo():
  // a Scheduler keeps one book across cycles, and a cycle's placements and
  // holds are its own. Each account touched is saved once, on first touch.
  void begin_undo();
  void undo();

  // What the group holds of `resource` above its guarantee (0 when none).
  Wide borrowed(std::string_view group, std::string_view resource) const;
  // Appends to `out` every resource of which the group holds above its
  // guarantee (borrowed() > 0), as views of the book's names.
  void borrowed_resources(std::string_view group, std::vector<std::string_view>& out) const;
  // Every limited resource of `per_replica` where the group would go above
  // its guarantee by taking `replicas` more.
  std::vector<std::string> would_borrow(std::string_view group, const Resources& per_replica, int replicas) const;
  // !would_borrow(group.name, ...).empty(), without naming them.
  bool borrows(const ResourceGroup& group, const Resources& per_replica, int replicas) const;

  // One kReasonQuota reason per resource of per_replica x replicas that the
  // group cannot take: above its guarantee without `may_borrow`, above its
  // ceiling, or above what its cohort leaves idle. Empty: admitted.
  // "gpu/any" is skipped: it is checked once the type is known.
  std::vector<PendingReason> check(const ResourceGroup& group, const Resources& per_replica, int replicas,
                                   bool may_borrow, bool count_held = true) const;
  // The same reasons, shared: a refusal is a function of its figures alone
  // (reasons::quota), so refusals with the same figures (group, resource,
  // amounts, top holders, cohort and borrowers) share one reason, worded
  // once until the next begin_undo(). A big queue asks this tens of
  // thousands of times a cycle, for about half as many distinct figures.
  std::vector<Reasons::Shared> refusals(const ResourceGroup& group, const Resources& per_replica, int replicas,
                                        bool may_borrow, bool count_held = true) const;
  // check(...).empty(), without building the reasons.
  bool fits(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
            bool count_held = true) const;
  // The same for one resource of a request (`amount` per replica).
  bool fits(const ResourceGroup& group, std::string_view resource, std::int64_t amount, int replicas,
            bool may_borrow, bool count_held = true) const;
  // fits(), or, given `refused`, refusals() into it and whether they are
  // none: they are none exactly when fits() says yes (each_refusal asks what
  // fits_one asks), so a caller that explains asks quota once, not twice.
  bool admits(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
              bool count_held, std::vector<Reasons::Shared>* refused) const;
  // True when per_replica x replicas could be admitted once the group's (and
  // its cohort's) other work is gone: within the guarantee, or the ceiling
  // when it may borrow. False: it never fits, waiting does not help.
  bool could_ever_fit(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow) const;

 private:
  // Who charged what, read only to explain a refusal. Views of strings the
  // caller keeps (snapshot, queue); amounts copied.
  struct Holding {
    std::string_view holder;
    const Resources* per_replica;
    std::int64_t replicas;
    // per_replica's amounts by resource id, resolved once when charged
    // (top_holders sums them without a name to look up).
    boost::container::small_vector<std::pair<int, std::int64_t>, 4> amounts;
  };
  // Resources as small ids, given on first sight (the groups' quotas, then
  // what is charged): an account's use, holds and limits are arrays by id,
  // so the questions asked for every task (fits, the cohort's sums over its
  // members) compare no names.
  struct Resource {
    int id = -1;  // -1: neither named by a quota nor charged
    std::string_view name;
  };
  Resource find_resource(std::string_view name) const;
  int resource_id(std::string_view name);
  // The amount by id, 0 past the end; the slot, grown to reach the id.
  static Wide at(const std::vector<Wide>& v, int id) {
    return id >= 0 && static_cast<std::size_t>(id) < v.size() ? v[static_cast<std::size_t>(id)] : 0;
  }
  static Wide& slot(std::vector<Wide>& v, int id);
  // A resource the group's quota names (named false: it does not), its figures read once.
  struct Limit {
    bool named = false;
    std::int64_t guaranteed = 0;
    std::int64_t ceiling = 0;  // max(guaranteed, max)
  };
  // One resource of an account: its use, holds and limit side by side, in
  // one cache line. A task's quota check reads all three of each resource
  // it asks for, and of each cohort member's: one miss, not three.
  struct Slot {
    Wide used = 0;
    Wide held = 0;
    Limit limit;
  };
  struct Account;
  // The account's slot by id (an empty one past the end); the slot, grown to reach the id.
  static const Slot& slot_at(const Account& a, int id);
  static Slot& slot(Account& a, int id);
  // Adds per_replica x times to one field of the account's slots.
  void charge(Account& a, Wide Slot::*field, const Resources& per_replica, std::int64_t times);
  // One group's book. decide() asks about a group's use, holds and limits
  // many times per task: one hash lookup finds all of them, and the members
  // of its cohort are at hand, instead of a map search by name for each.
  struct Account {
    std::string name;
    const ResourceGroup* group = nullptr;  // nullptr: charged, but not a known group
    std::vector<Slot> slots;               // by resource id; limits as group->quota names them
    bool has_held = false;
    std::vector<Holding> holdings;
    std::vector<Wide> holdings_of;  // by resource id: how many holdings hold some of it
    // Per holder, what its holdings add up to (by resource id), for
    // top_holders(): summed on the first refusal that names holders and
    // brought up to date after (holdings only grow). Caches in a const
    // book: one book, one thread.
    mutable std::vector<std::pair<std::string_view, std::vector<Wide>>> holder_sums;
    mutable std::size_t summed = 0;  // holdings already in holder_sums
    // top_holders() by resource id, as of `summed` holdings: a group's
    // refusals ask for the same few resources between two of its charges.
    struct TopHolders {
      int resource = -1;
      std::size_t summed = 0;
      std::vector<std::pair<std::string_view, std::int64_t>> top;
    };
    mutable std::vector<TopHolders> top_holders;
    const std::vector<Account*>* cohort = nullptr;  // members that are known groups, in input order
    std::uint64_t saved_in = 0;  // the undo epoch this account was saved in
  };
  struct Saved {
    Account* account;
    std::vector<Slot> slots;
    bool has_held;
    std::size_t holdings;
  };
  // Over the cohort's members that limit `resource`: sum of guarantees and of use.
  struct CohortSums {
    Wide guaranteed = 0;
    Wide used = 0;
  };
  const Account* account(std::string_view group) const;
  // Whether the account (of a known group) goes above its guarantee of
  // `resource` by taking `amount` x `replicas` more (would_borrow, borrows).
  bool above_guarantee(const Account& a, std::string_view resource, Wide amount, int replicas) const;
  // account(group.name), found by where the group sits among the book's groups
  // (no name to hash) when it is one of them.
  const Account* account_of(const ResourceGroup& group) const;
  Account& account_for(std::string_view group);
  // Account for a change: saved first when an undo is open.
  Account& changing(std::string_view group);
  Account& changing(Account& a);
  // A limit of the account's own group: `field` of its kept Limit, or, for a
  // resource its quota does not name, none (cpu, memory, open) or 0.
  std::optional<std::int64_t> kept_limit(const Account& a, Resource r, std::int64_t Limit::*field) const;
  // quota_limit/quota_ceiling from the account's copy, when it is that group's.
  std::optional<std::int64_t> limit_of(const Account* a, const ResourceGroup& group, Resource r) const;
  std::optional<std::int64_t> ceiling_of(const Account* a, const ResourceGroup& group, Resource r) const;
  // The known groups of group's cohort (nullptr: none): the account's own
  // list when it is the group's, else found by the cohort's name.
  const std::vector<Account*>* cohort_members(const Account* a, const ResourceGroup& group) const;
  CohortSums cohort_sums(const Account* a, const ResourceGroup& group, Resource r, bool count_held) const;
  bool fits_one(const Account* a, const ResourceGroup& group, std::string_view resource, std::int64_t amount,
                int replicas, bool may_borrow, bool count_held) const;
  static Wide in_use(const Account* a, Resource r, bool count_held);
  Wide borrowed(const Account* a, Resource r) const;
  // The account's three largest holders of `r`, largest first (ties: by
  // name). A view of the account's cache: valid until the next call.
  std::span<const std::pair<std::string_view, std::int64_t>> top_holders(const Account* a, Resource r) const;
  // Forgets the account's holder sums (holdings gone): summed again when next asked.
  static void forget_holder_sums(Account& a);
  // Calls `refused(figures, account, resource)` for each resource check()
  // refuses; the figures' holders are left for it to fill (top_holders).
  template <class F>
  void each_refusal(const ResourceGroup& group, const Resources& per_replica, int replicas, bool may_borrow,
                    bool count_held, F&& refused) const;
  // Reasons worded by refusals(), by their figures (a byte key); dropped by
  // begin_undo(), undo() and remove_kept().
  mutable FlatBytesMap<Reasons::Shared> worded_;
  mutable std::string key_;  // refusals()' buffer

  std::deque<std::string> resource_names_;                // by id
  std::unordered_map<std::string_view, int> resource_ids_;  // views of resource_names_
  std::vector<char> open_by_default_;  // by id: cpu and memory, not limited unless named
  std::deque<Account> accounts_;  // stable addresses: the index and cohorts point into it
  std::unordered_map<std::string_view, Account*> by_name_;  // views of Account::name
  const ResourceGroup* groups_ = nullptr;  // the groups the book was built with
  std::vector<Account*> by_group_;         // by their position; nullptr for a name seen before
  std::map<std::string, std::vector<Account*>, std::less<>> cohorts_;
  bool has_holds_ = false;
  std::deque<Resources> kept_;  // copies that holdings point to
  // Open undo (begin_undo): its epoch, and what to put back.
  std::uint64_t undo_epoch_ = 0;
  bool recording_ = false;
  std::vector<Saved> saved_;
  std::size_t accounts_before_ = 0;
  std::size_t kept_before_ = 0;
  bool has_holds_before_ = false;
};

}  // namespace cp::sched
