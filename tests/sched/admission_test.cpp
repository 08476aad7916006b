// Stage 2 with cohorts: borrowing idle guaranteed capacity, up to a ceiling.
#include <random>

#include "harness.h"
#include "sched/admission.h"
#include "sched/reasons.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
constexpr std::string_view kNode = "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8";

// Four 8-GPU nodes in one cluster: nodes are never the constraint here.
class BorrowTest : public SchedTest {
 protected:
  void SetUp() override {
    auto c1 = fleet.cluster("c1");
    for (int i = 1; i <= 4; ++i) c1.node("n" + std::to_string(i), kNode, kA100Label);
    fleet.priority_classes();
    group("rg-a", "gpu/nvidia-a100-80gb:8", {"c1"});
    group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  }
};

TEST_F(BorrowTest, AGroupBorrowsIdleCapacityOfItsCohortUpToItsMax) {
  // rg-b lends its idle 8; rg-a may hold up to its max of 12.
  fleet.borrow("rg-a", std::string(kA100), "12", "shared");
  fleet.borrow("rg-b", std::string(kA100), "8", "shared");
  for (int i = 1; i <= 4; ++i) queue.task("t" + std::to_string(i), "rg-a", "gpu/nvidia-a100-80gb:4");
  Plan plan = run();
  EXPECT_EQ(placed(plan), (std::vector<std::string>{"t1", "t2", "t3"}));
  EXPECT_FALSE(placement_of(plan, "t2")->borrowing);
  EXPECT_TRUE(placement_of(plan, "t3")->borrowing);
  const PendingReason& r = reason(plan, "t4");
  EXPECT_EQ(r.code, kReasonQuota);
  EXPECT_EQ(r.details.at("ceiling").as_int64(), 12);
  EXPECT_NE(r.message.find("borrowing stops at the group's max of 12"), std::string::npos) << r.message;
  EXPECT_NE(r.message_zh.find("借用上限为 12"), std::string::npos) << r.message_zh;
}

TEST_F(BorrowTest, BorrowingStopsAtWhatTheCohortLeavesIdle) {
  // rg-b uses 6 of its 8: only 2 are idle to lend, whatever rg-a's max says.
  // (Reservations off: t2 would otherwise hold rg-a's quota and t3 wait behind it.)
  fleet.snapshot.config.reservations_per_group = 0;
  fleet.borrow("rg-a", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", std::string(kA100), "8", "shared");
  fleet.running("rb", "rg-b", "c1", "gpu/nvidia-a100-80gb:6", {{0, "n4", {0, 1, 2, 3, 4, 5}}});
  queue.task("t1", "rg-a", "gpu/nvidia-a100-80gb:8");
  queue.task("t2", "rg-a", "gpu/nvidia-a100-80gb:4");
  queue.task("t3", "rg-a", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  EXPECT_EQ(placed(plan), (std::vector<std::string>{"t1", "t3"}));
  const PendingReason& r = reason(plan, "t2");
  EXPECT_EQ(r.code, kReasonQuota);
  EXPECT_EQ(r.details.at("cohort_idle").as_int64(), 2);
  EXPECT_EQ(r.message,
            "quota: gpu/nvidia-a100-80gb 8 of 10 in use by rg-a (pg-rg-a 8), this task asks for 4; cohort shared has 2 idle");
}

TEST_F(BorrowTest, WithoutACohortMaxIsNotReachable) {
  // A max with nobody to borrow from is only the guarantee.
  fleet.borrow("rg-a", std::string(kA100), "16", "");
  queue.task("t1", "rg-a", "gpu/nvidia-a100-80gb:8");
  queue.task("t2", "rg-a", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"t1"});
  EXPECT_EQ(reason(plan, "t2").details.at("limit").as_int64(), 8);
}

TEST_F(BorrowTest, WorkThatCannotBePreemptedNeverBorrows) {
  // Borrowed capacity must be reclaimable; urgent here is not preemptible.
  fleet.borrow("rg-a", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", std::string(kA100), "8", "shared");
  queue.task("t1", "rg-a", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000);
  queue.task("t2", "rg-a", "gpu/nvidia-a100-80gb:2").priority_class("urgent", 1000);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"t1"});
  const PendingReason& r = reason(plan, "t2");
  EXPECT_FALSE(r.details.at("may_borrow").as_bool());
  EXPECT_NE(r.message.find("not preemptible, so it may not borrow from cohort shared"), std::string::npos);
}

TEST_F(BorrowTest, QuotaReasonsSayWhoHoldsTheResource) {
  fleet.running("r1", "rg-a", "c1", "gpu/nvidia-a100-80gb:6", {{0, "n1", {0, 1, 2, 3, 4, 5}}}).project_group = "proj-x";
  fleet.running("r2", "rg-a", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n2", {0, 1}}}).project_group = "proj-y";
  queue.task("t1", "rg-a", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.message, "quota: gpu/nvidia-a100-80gb 8 of 8 in use by rg-a (proj-x 6, proj-y 2), this task asks for 1");
  EXPECT_EQ(r.message_zh, "配额不足：rg-a 的 gpu/nvidia-a100-80gb 已用 8/8（proj-x 6，proj-y 2），本任务申请 1");
}

// refusals() words what check() words, and refusals with the same figures
// share one reason until the next begin_undo().
TEST_F(BorrowTest, SharedRefusalsAreCheckedReasonsWordedOnce) {
  fleet.borrow("rg-a", std::string(kA100), "12", "shared");
  fleet.borrow("rg-b", std::string(kA100), "8", "shared");
  QuotaBook book(fleet.snapshot.resource_groups);
  const ResourceGroup& a = fleet.snapshot.resource_groups[0];
  ASSERT_EQ(a.name, "rg-a");
  book.add("rg-a", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 10, "proj-x");
  book.add("rg-b", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 4, "proj-y");
  const Resources four = Resources::parse_or_die("gpu/nvidia-a100-80gb:4,cpu:8");
  auto same = [](const std::vector<PendingReason>& checked, const std::vector<Reasons::Shared>& shared) {
    ASSERT_EQ(checked.size(), shared.size());
    for (std::size_t i = 0; i < checked.size(); ++i) {
      EXPECT_EQ(checked[i].code, shared[i]->worded().code);
      EXPECT_EQ(checked[i].message, shared[i]->worded().message);
      EXPECT_EQ(checked[i].message_zh, shared[i]->worded().message_zh);
      EXPECT_EQ(checked[i].details, shared[i]->worded().details);
    }
  };
  for (bool may_borrow : {true, false}) {
    auto first = book.refusals(a, four, 1, may_borrow);
    ASSERT_EQ(first.size(), 1u);
    same(book.check(a, four, 1, may_borrow), first);
    // Asked again, the same figures: the same reason, not a new one.
    EXPECT_EQ(book.refusals(a, four, 1, may_borrow).front(), first.front());
  }
  auto before = book.refusals(a, four, 1, true);
  // One more GPU in use: other figures, another reason.
  book.add("rg-a", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 1, "proj-z");
  auto after = book.refusals(a, four, 1, true);
  EXPECT_NE(after.front(), before.front());
  same(book.check(a, four, 1, true), after);
  EXPECT_NE(after.front()->worded().message, before.front()->worded().message);
  // A new cycle words again.
  book.begin_undo();
  auto fresh = book.refusals(a, four, 1, true);
  EXPECT_NE(fresh.front(), after.front());
  EXPECT_EQ(fresh.front()->worded().message, after.front()->worded().message);
}

TEST_F(BorrowTest, RefusalsKeptAsFiguresAreToldApartByThem) {
  // A refusal keeps its figures and is worded when first read; an unchanged
  // one (a new object with the same figures, as a later cycle makes) is the
  // same reason without wording either.
  fleet.borrow("rg-a", std::string(kA100), "12", "shared");
  fleet.borrow("rg-b", std::string(kA100), "8", "shared");
  QuotaBook book(fleet.snapshot.resource_groups);
  const ResourceGroup& a = fleet.snapshot.resource_groups[0];
  book.add("rg-a", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 10, "proj-x");
  const Resources four = Resources::parse_or_die("gpu/nvidia-a100-80gb:4");
  auto before = book.refusals(a, four, 1, true);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(cp::sched::reasons::quota_resource(*before.front()), kA100);
  book.begin_undo();
  auto again = book.refusals(a, four, 1, true);
  ASSERT_NE(again.front(), before.front());
  EXPECT_TRUE(again.front()->same_as(*before.front()));
  using Kept = FiguredReason<cp::sched::reasons::QuotaRefusal>;
  const auto* kept = dynamic_cast<const Kept*>(again.front().get());
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->figures().holders, (cp::sched::reasons::QuotaRefusal::Amounts{{"proj-x", 10}}));
  // Other figures: another reason, told apart before any wording.
  book.add("rg-a", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 1, "proj-z");
  auto after = book.refusals(a, four, 1, true);
  EXPECT_FALSE(after.front()->same_as(*again.front()));
  // Against a reason worded when made (as a stored one is): by the words.
  const Reasons::Shared worded = Reasons::make(book.check(a, four, 1, true).front());
  EXPECT_TRUE(after.front()->same_as(*worded));
  EXPECT_TRUE(worded->same_as(*after.front()));
  EXPECT_FALSE(before.front()->same_as(*worded));
  Reasons one, other;
  one.add(after.front());
  other.add(worded);
  EXPECT_TRUE(one.same_as(other));
  other.add(worded);
  EXPECT_FALSE(one.same_as(other));
}

// Resources by id: one no quota names and nobody charged, one charged but
// named by no quota, cpu and memory unnamed.
TEST(QuotaBookResources, UnnamedResourcesKeepTheirDefaultLimits) {
  std::vector<ResourceGroup> groups(1);
  groups[0].name = "rg";
  groups[0].quota[std::string(kA100)] = QuotaEntry{4, std::nullopt};
  QuotaBook book(groups);
  const ResourceGroup& g = groups[0];
  // cpu and memory are not limited unless named, whatever is in use.
  book.add("rg", Resources::parse_or_die("cpu:1000,memory:1Ti"), 3);
  EXPECT_TRUE(book.fits(g, Resources::parse_or_die("cpu:5000,memory:100Ti"), 1, true));
  // A GPU type no quota names: limit 0, charged or not.
  EXPECT_FALSE(book.fits(g, Resources::parse_or_die("gpu/nvidia-l40s:1"), 1, true));
  book.add("other", Resources::parse_or_die("gpu/nvidia-h100-80gb:2"), 1);
  EXPECT_FALSE(book.fits(g, Resources::parse_or_die("gpu/nvidia-h100-80gb:1"), 1, true));
  EXPECT_EQ(book.check(g, Resources::parse_or_die("gpu/nvidia-h100-80gb:1"), 1, true).size(), 1u);
  // The named type, up to its guarantee, counting use and holds.
  EXPECT_TRUE(book.fits(g, Resources::parse_or_die("gpu/nvidia-a100-80gb:4"), 1, true));
  book.hold("rg", Resources::parse_or_die("gpu/nvidia-a100-80gb:1"), 2);
  EXPECT_FALSE(book.fits(g, Resources::parse_or_die("gpu/nvidia-a100-80gb:3"), 1, true));
  EXPECT_TRUE(book.fits(g, Resources::parse_or_die("gpu/nvidia-a100-80gb:3"), 1, true, false));
  EXPECT_EQ(book.would_borrow("rg", Resources::parse_or_die("gpu/nvidia-a100-80gb:5"), 1),
            std::vector<std::string>{std::string(kA100)});
  EXPECT_TRUE(book.would_borrow("rg", Resources::parse_or_die("cpu:5000"), 1).empty());
}

// Property: quota refuses exactly when it has reasons to give. A fit that
// explains asks admits() for the refusals alone and takes an empty list for
// a yes, so fits(), refusals() (and check()) must agree on every book, request and
// way of asking: cohorts or none, maxes, named or open cpu and memory,
// holds, gpu/any entries, zero amounts, resources no quota names.
TEST(QuotaBookProperty, RefusalsAreEmptyExactlyWhenItFits) {
  std::mt19937_64 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const std::vector<std::string> names = {std::string(kA100), "gpu/nvidia-l40s", "cpu", "memory", "example.com/fpga"};
  int refused = 0, admitted = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<ResourceGroup> groups(3);
    for (int g = 0; g < 3; ++g) {
      ResourceGroup& rg = groups[static_cast<std::size_t>(g)];
      rg.name = "rg-" + std::to_string(g);
      if (pick(3) != 0) rg.cohort = pick(2) == 0 ? "x" : "y";
      for (const auto& n : names) {
        if (pick(3) == 0) continue;  // not named: open (cpu, memory) or 0
        std::optional<std::int64_t> max;
        if (pick(2) == 0) max = pick(24);
        rg.quota[n] = QuotaEntry{pick(16), max};
      }
    }
    QuotaBook book(groups);
    for (int i = 0; i < 6; ++i) {
      Resources r;
      r.set(names[static_cast<std::size_t>(pick(5))], pick(6));
      r.set(names[static_cast<std::size_t>(pick(5))], pick(6));
      const std::string& g = groups[static_cast<std::size_t>(pick(3))].name;
      if (pick(3) == 0) {
        book.hold(g, r, 1 + pick(2));
      } else {
        book.add(g, r, 1 + pick(2), pick(2) == 0 ? std::string_view("pg-a") : std::string_view());
      }
    }
    for (int ask = 0; ask < 20; ++ask) {
      Resources r;
      for (int k = 0; k < 1 + pick(3); ++k) r.set(names[static_cast<std::size_t>(pick(5))], pick(9));
      if (pick(4) == 0) r.set(std::string(kGpuAny), 1 + pick(4));
      const ResourceGroup& g = groups[static_cast<std::size_t>(pick(3))];
      const int replicas = 1 + pick(3);
      for (bool may_borrow : {true, false}) {
        for (bool count_held : {true, false}) {
          const bool fits = book.fits(g, r, replicas, may_borrow, count_held);
          ASSERT_EQ(fits, book.refusals(g, r, replicas, may_borrow, count_held).empty())
              << "round " << round << ": " << r.to_string() << " x" << replicas << " in " << g.name;
          ASSERT_EQ(fits, book.check(g, r, replicas, may_borrow, count_held).empty()) << "round " << round;
          std::vector<Reasons::Shared> why;
          ASSERT_EQ(fits, book.admits(g, r, replicas, may_borrow, count_held, &why)) << "round " << round;
          ASSERT_EQ(fits, why.empty()) << "round " << round;
          ASSERT_EQ(fits, book.admits(g, r, replicas, may_borrow, count_held, nullptr)) << "round " << round;
          ++(fits ? admitted : refused);
        }
      }
    }
  }
  EXPECT_GT(refused, 1000);  // both answers are exercised
  EXPECT_GT(admitted, 1000);
}

// Property: over random cohorts, ceilings and queues, replaying the plan's
// placements in order, a group only goes above its guarantee by borrowing:
// never above its max, and only while its cohort as a whole stays within the
// sum of its members' guarantees. (A member may still take its own guarantee
// back later: that is what reclaim is for.)
TEST(BorrowProperty, QuotaIsNeverExceededExceptByBorrowingUpToMax) {
  std::mt19937_64 rng(42);
  int borrowed = 0;
  for (int round = 0; round < 200; ++round) {
    Fleet fleet;
    auto c1 = fleet.cluster("c1");
    for (int i = 0; i < 6; ++i) c1.node("n" + std::to_string(i), kNode, kA100Label);
    std::vector<std::string> names;
    for (int g = 0; g < 4; ++g) {
      std::string name = "rg-" + std::to_string(g);
      names.push_back(name);
      fleet.group(name, "gpu/nvidia-a100-80gb:" + std::to_string(rng() % 12), {"c1"});
      if (rng() % 3 != 0) fleet.borrow(name, std::string(kA100), std::to_string(rng() % 20), g % 2 ? "x" : "y");
    }
    Queue queue;
    for (int t = 0; t < 20; ++t) {
      queue.task("t" + std::to_string(t), names[rng() % names.size()],
                 "gpu/nvidia-a100-80gb:" + std::to_string(1 + rng() % 4), 1 + static_cast<int>(rng() % 2));
    }
    Plan plan = decide(fleet.snapshot, queue.tasks, kT0);
    std::map<std::string, const ResourceGroup*> group_of_task;
    for (const auto& q : queue.tasks) {
      for (const auto& g : fleet.snapshot.resource_groups) {
        if (g.name == q.task.resource_group) group_of_task[q.task.id] = &g;
      }
    }
    std::map<std::string, std::int64_t> held;
    for (const auto& p : plan.placements) {
      const ResourceGroup& g = *group_of_task.at(p.task_id);
      const QuotaEntry& q = g.quota.at(std::string(kA100));
      held[g.name] += p.per_replica.gpus() * std::ssize(p.placements);
      if (held[g.name] <= q.guaranteed) continue;
      ++borrowed;
      ASSERT_FALSE(g.cohort.empty()) << "round " << round << ": " << p.task_id << " above guarantee without cohort";
      ASSERT_LE(held[g.name], q.max.value_or(0)) << "round " << round << ": " << p.task_id << "\n" << describe(plan);
      std::int64_t cohort_held = 0, cohort_guaranteed = 0;
      for (const auto& m : fleet.snapshot.resource_groups) {
        if (m.cohort != g.cohort) continue;
        cohort_held += held[m.name];
        cohort_guaranteed += m.quota.at(std::string(kA100)).guaranteed;
      }
      ASSERT_LE(cohort_held, cohort_guaranteed) << "round " << round << ": " << p.task_id << "\n" << describe(plan);
      ASSERT_TRUE(p.borrowing) << p.task_id;
    }
  }
  EXPECT_GT(borrowed, 20);  // the scenarios do exercise borrowing
}

}  // namespace
}  // namespace cp::sched::testing
