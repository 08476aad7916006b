// Stage 1: which task is tried first.
#include <algorithm>

#include "harness.h"
#include "sched/queue_order.h"

namespace cp::sched::testing {
namespace {

// One 8-GPU node and a quota that is not the constraint: only the order decides.
class OrderTest : public SchedTest {
 protected:
  void SetUp() override {
    fleet.cluster("c1").node("n1", "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8", {{"gpu-type", "nvidia-a100-80gb"}});
    group("rg-b", "gpu/nvidia-a100-80gb:64", {"c1"});
  }
};

TEST_F(OrderTest, HigherPriorityGoesFirstEvenIfQueuedLater) {
  // Of two tasks that cannot both fit, the higher priority one is placed,
  // whatever the queue times.
  queue.task("t-low", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 10).queued_at(kT0);
  queue.task("t-high", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 100).queued_at(kT0 + 60'000);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"t-high"});
  EXPECT_EQ(reason_code(plan, "t-low"), kReasonNoNode);
}

TEST_F(OrderTest, EarlierQueuedGoesFirstAtEqualPriority) {
  // At equal priority the task queued earlier wins, even when its id sorts later.
  queue.task("a-late", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50).queued_at(kT0 + 1);
  queue.task("b-early", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50).queued_at(kT0);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"b-early"});
}

TEST_F(OrderTest, CreationTimeBreaksQueueTimeTies) {
  // Equal priority and queue time: the task created earlier wins.
  queue.task("a", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50).created_at(kT0 + 5);
  queue.task("b", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50).created_at(kT0);
  EXPECT_EQ(placed(run()), std::vector<std::string>{"b"});
}

TEST_F(OrderTest, IdBreaksTheRemainingTies) {
  // Equal priority, queue and creation times: the smaller id wins.
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50);
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50);
  EXPECT_EQ(placed(run()), std::vector<std::string>{"t1"});
}

TEST_F(OrderTest, PriorityOrdersAcrossResourceGroupsSharingNodes) {
  // Two groups sharing a node: a high-priority task of one group goes before
  // a low-priority task of the other, whatever the group names.
  group("rg-a", "gpu/nvidia-a100-80gb:64", {"c1"});
  queue.task("t-a", "rg-a", "gpu/nvidia-a100-80gb:8", 1, 1);
  queue.task("t-b", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 9);
  EXPECT_EQ(placed(run()), std::vector<std::string>{"t-b"});
}

// A stand-in for fair share: within a group, ids in reverse.
class ReverseIdOrder final : public QueueOrder {
 public:
  void sort_group(std::vector<const QueuedTask*>& tasks) const override {
    std::sort(tasks.begin(), tasks.end(), [](auto* a, auto* b) { return a->task.id > b->task.id; });
  }
};

TEST_F(OrderTest, TheOrderWithinAGroupIsReplaceable) {
  // decide() takes the order inside a group from the QueueOrder it is given.
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50);
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 50);
  Plan plan = decide(fleet.snapshot, queue.tasks, kT0, ReverseIdOrder{});
  EXPECT_EQ(placed(plan), std::vector<std::string>{"t2"});
}

// ------------------------------------------------------------ fair share

TEST_F(OrderTest, TheProjectGroupWithTheSmallerShareGoesFirst) {
  // proj-x already holds 4 of rg-b's 64 GPUs; proj-y holds none. At equal
  // priority proj-y's task goes first although it was queued later.
  fleet.running("rx", "rg-b", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}}).project_group = "proj-x";
  queue.task("x1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-x", "alice").queued_at(kT0);
  queue.task("y1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-y", "bob").queued_at(kT0 + 60'000);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"y1"}) << describe(plan);
}

TEST_F(OrderTest, ProjectGroupsTakeTurnsAsTheirSharesGrow) {
  // proj-x queued three tasks before proj-y's three; with room for four, the
  // order alternates instead of giving proj-x all of its tasks first.
  for (int i = 1; i <= 3; ++i) {
    queue.task("x" + std::to_string(i), "rg-b", "gpu/nvidia-a100-80gb:2").owner("proj-x", "alice").queued_at(kT0 + i);
  }
  for (int i = 1; i <= 3; ++i) {
    queue.task("y" + std::to_string(i), "rg-b", "gpu/nvidia-a100-80gb:2").owner("proj-y", "bob").queued_at(kT0 + 10 + i);
  }
  Plan plan = run();
  EXPECT_EQ(placed(plan), (std::vector<std::string>{"x1", "y1", "x2", "y2"})) << describe(plan);
}

TEST_F(OrderTest, InsideAProjectGroupUsersShareFairlyToo) {
  fleet.running("ra", "rg-b", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}}).project_group = "proj-x";
  queue.task("a1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-x", "alice").queued_at(kT0);
  queue.task("c1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-x", "carol").queued_at(kT0 + 1);
  Plan plan = run();  // the running work is alice's (harness default)
  EXPECT_EQ(placed(plan), std::vector<std::string>{"c1"}) << describe(plan);
}

TEST_F(OrderTest, PriorityComesBeforeFairShare) {
  fleet.running("ry", "rg-b", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}}).project_group = "proj-y";
  queue.task("x1", "rg-b", "gpu/nvidia-a100-80gb:4", 1, 10).owner("proj-x", "alice");
  queue.task("y1", "rg-b", "gpu/nvidia-a100-80gb:4", 1, 20).owner("proj-y", "bob");
  EXPECT_EQ(placed(run()), std::vector<std::string>{"y1"});
}

TEST_F(OrderTest, FairShareCanBeTurnedOff) {
  fleet.snapshot.config.fair_share = false;
  fleet.running("rx", "rg-b", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}}).project_group = "proj-x";
  queue.task("x1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-x", "alice").queued_at(kT0);
  queue.task("y1", "rg-b", "gpu/nvidia-a100-80gb:4").owner("proj-y", "bob").queued_at(kT0 + 60'000);
  EXPECT_EQ(placed(run()), std::vector<std::string>{"x1"});
}

TEST(FairShareOrder, ShareIsTheDominantResourceOverTheGuarantee) {
  Fleet fleet;
  fleet.group("rg-b", "gpu/nvidia-a100-80gb:16,cpu:100", {"c1"});
  fleet.running("r", "rg-b", "c1", "gpu/nvidia-a100-80gb:2,cpu:40", {{0, "n1", {0, 1}}}).project_group = "proj-x";
  FairShareOrder order(fleet.snapshot);
  EXPECT_DOUBLE_EQ(order.share("rg-b", "proj-x"), 0.4);  // cpu 40/100 beats gpu 2/16
  EXPECT_DOUBLE_EQ(order.share("rg-b", "proj-x", "alice"), 0.4);
  EXPECT_DOUBLE_EQ(order.share("rg-b", "proj-y"), 0.0);
}

TEST(FairShareOrder, CountedByTheCallerItHasTheSnapshotsShares) {
  // The Scheduler's way (groups_to_count(), then count() each of their
  // works) and the snapshot's way give the same shares; a group with one
  // queued task is not asked for.
  Fleet fleet;
  fleet.group("rg-a", "cpu:100", {"c1"});
  fleet.group("rg-b", "gpu/nvidia-a100-80gb:16,cpu:100", {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2,cpu:40", {{0, "n1", {0, 1}}}).project_group = "proj-x";
  RunningWork& r2 = fleet.running("r2", "rg-b", "c1", "gpu/nvidia-a100-80gb:4,cpu:8", {{0, "n2", {0, 1, 2, 3}}});
  r2.project_group = "proj-y";
  r2.user = "bob";
  fleet.running("r3", "rg-a", "c1", "cpu:50", {{0, "n3", {}}}).project_group = "proj-x";
  Queue q;
  q.task("a1", "rg-a", "cpu:1");
  q.task("b1", "rg-b", "cpu:1");
  q.task("b2", "rg-b", "cpu:1");
  FairShareOrder from_snapshot(fleet.snapshot);
  FairShareOrder counted(fleet.snapshot.resource_groups, q.tasks);
  ASSERT_EQ(counted.groups_to_count(), std::vector<std::string_view>{"rg-b"});
  for (const RunningWork& w : fleet.snapshot.running) {
    if (w.resource_group == "rg-b") counted.count(w);
  }
  for (const auto& [project, user] : std::vector<std::pair<std::string, std::string>>{
           {"proj-x", ""}, {"proj-x", "alice"}, {"proj-y", ""}, {"proj-y", "bob"}, {"proj-y", "alice"}, {"proj-z", ""}}) {
    EXPECT_DOUBLE_EQ(counted.share("rg-b", project, user), from_snapshot.share("rg-b", project, user))
        << project << "/" << user;
  }
  EXPECT_DOUBLE_EQ(from_snapshot.share("rg-b", "proj-y"), 0.25);         // gpu 4/16 beats cpu 8/100
  EXPECT_DOUBLE_EQ(from_snapshot.share("rg-b", "proj-y", "alice"), 0.0);  // bob's work, not alice's
  EXPECT_DOUBLE_EQ(from_snapshot.share("rg-a", "proj-x"), 0.5);
}

TEST(FairShareOrder, EachPriorityStartsFromTheRunningWork) {
  // proj-x holds half the group's GPUs: at each priority proj-y goes first,
  // what the higher priority's tasks would add is not carried down.
  Fleet fleet;
  fleet.group("rg-b", "gpu/nvidia-a100-80gb:16", {"c1"});
  fleet.running("r", "rg-b", "c1", "gpu/nvidia-a100-80gb:8", {{0, "n1", {0, 1, 2, 3, 4, 5, 6, 7}}}).project_group =
      "proj-x";
  Queue q;
  q.task("x-high", "rg-b", "gpu/nvidia-a100-80gb:1", 1, 20).owner("proj-x", "alice").queued_at(kT0);
  q.task("y-high", "rg-b", "gpu/nvidia-a100-80gb:12", 1, 20).owner("proj-y", "bob").queued_at(kT0 + 1);
  q.task("x-low", "rg-b", "gpu/nvidia-a100-80gb:1", 1, 10).owner("proj-x", "alice").queued_at(kT0);
  q.task("y-low", "rg-b", "gpu/nvidia-a100-80gb:1", 1, 10).owner("proj-y", "bob").queued_at(kT0 + 1);
  std::vector<std::string> ids;
  for (const QueuedTask* t : processing_order(q.tasks, FairShareOrder(fleet.snapshot))) ids.push_back(t->task.id);
  // Had the higher priority's tasks been counted at priority 10, proj-y
  // (12 of 16) would be above proj-x (9 of 16), and x-low would go first.
  EXPECT_EQ(ids, (std::vector<std::string>{"y-high", "x-high", "y-low", "x-low"}));
}

TEST(ProcessingOrder, MergesGroupsByTheirHeads) {
  // Each group keeps its own order; across groups the better head goes first.
  Queue q;
  q.task("a1", "rg-a", "cpu:1", 1, 5);
  q.task("a2", "rg-a", "cpu:1", 1, 1);
  q.task("b1", "rg-b", "cpu:1", 1, 3);
  q.task("b2", "rg-b", "cpu:1", 1, 9);
  std::vector<std::string> ids;
  for (const QueuedTask* t : processing_order(q.tasks, PriorityOrder{})) ids.push_back(t->task.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b2", "a1", "b1", "a2"}));
}

TEST(ProcessingOrder, NamesEachTasksGroupOnce) {
  // grouped_order: the same order, each task with its group's position
  // among the queue's group names (ascending, each once).
  Queue q;
  q.task("a1", "rg-a", "cpu:1", 1, 5);
  q.task("c1", "rg-c", "cpu:1", 1, 7);
  q.task("b1", "rg-b", "cpu:1", 1, 3);
  q.task("a2", "rg-a", "cpu:1", 1, 1);
  const GroupedOrder g = grouped_order(q.tasks, PriorityOrder{});
  EXPECT_EQ(g.groups, (std::vector<std::string_view>{"rg-a", "rg-b", "rg-c"}));
  ASSERT_EQ(g.tasks.size(), 4u);
  ASSERT_EQ(g.group_of.size(), 4u);
  std::vector<const QueuedTask*> plain = processing_order(q.tasks, PriorityOrder{});
  EXPECT_EQ(g.tasks, plain);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) EXPECT_EQ(g.groups[g.group_of[i]], g.tasks[i]->task.resource_group);
}

}  // namespace
}  // namespace cp::sched::testing
