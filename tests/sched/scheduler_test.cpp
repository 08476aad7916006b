// The cycle as a whole: gates before placement, determinism, completeness.
#include <algorithm>
#include <random>
#include <set>

#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
constexpr std::string_view kA100Node = "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8";

class CycleTest : public SchedTest {
 protected:
  // A fleet with contention: two clusters, a group per placement policy, a
  // queue larger than both clusters, running work, a dependency, an offline
  // cluster.
  void busy_fleet() {
    fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
    fleet.cluster("c2", {{"region", "west"}}).node("m1", kA100Node, kA100Label).node("m2", "cpu:32,memory:64Gi");
    fleet.cluster("c3").node("x1", kA100Node, kA100Label).state(ClusterState::offline, "unreachable");
    group("rg-a", "gpu/nvidia-a100-80gb:16", {"c1", "c2"});
    group("rg-b", "gpu/nvidia-a100-80gb:12,cpu:40", {"c1", "c2", "c3"}, PlacementPolicy::spread);
    fleet.running("r1", "rg-a", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n1", {0, 3}}});
    int i = 0;
    for (int prio : {5, 50, 5, 500, 50, 5, 50, 5, 500, 5, 50, 5}) {
      std::string id = "t" + std::to_string(i);
      std::string rg = i % 2 == 0 ? "rg-a" : "rg-b";
      int replicas = 1 + i % 3;
      queue.task(id, rg, "cpu:4,gpu/nvidia-a100-80gb:" + std::to_string(1 + i % 4), replicas, prio)
          .queued_at(kT0 + (i * 7) % 5);
      ++i;
    }
    queue.task("cpu-only", "rg-b", "cpu:8,memory:8Gi", 2, 5);
    queue.task("any", "rg-a", "gpu/any:1", 1, 5);
    queue.task("west", "rg-b", "gpu/nvidia-a100-80gb:1", 1, 5).cluster_selector({{"region", "west"}});
    queue.task("later", "rg-a", "gpu/nvidia-a100-80gb:1").waiting_for({"t0"});
    // Every rule at once: borrowing in a cohort, preemption by priority,
    // fair share between project groups and users, a fallback shape.
    fleet.priority_classes(60);
    fleet.borrow("rg-a", std::string(kA100), "24", "shared");
    fleet.borrow("rg-b", std::string(kA100), "12", "shared");
    RunningWork& low = fleet.running("low", "rg-b", "c2", "gpu/nvidia-a100-80gb:4", {{0, "m1", {4, 5, 6, 7}}});
    low.priority = 10;
    low.checkpoint = true;
    for (int u = 0; u < 3; ++u) {
      queue.task("u" + std::to_string(u), "rg-b", "gpu/nvidia-a100-80gb:4")
          .priority_class("urgent", 1000)
          .owner(u == 0 ? "proj-x" : "proj-y", u == 2 ? "bob" : "alice")
          .queued_at(kT0 - 120'000 + u);
    }
    queue.task("fb", "rg-a", "gpu/nvidia-h100-80gb:1").fallback(1, "gpu/nvidia-a100-80gb:1").queued_at(kT0 - 5'000);
  }
};

TEST_F(CycleTest, ATaskWithUnfinishedDependenciesWaits) {
  // Upstream tasks not yet Succeeded keep a task pending, naming them.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  queue.task("train", "rg-b", "gpu/nvidia-a100-80gb:1").waiting_for({"prepare"});
  Plan plan = run();
  const PendingReason& r = reason(plan, "train");
  EXPECT_EQ(r.code, kReasonDependencies);
  EXPECT_EQ(r.message, "waiting for 1 upstream task: prepare");
  EXPECT_EQ(r.message_zh, "等待 1 个上游任务：prepare");
  EXPECT_EQ(dump(r.details), R"({"tasks":["prepare"]})");
}

TEST_F(CycleTest, AnUnknownResourceGroupIsReported) {
  // A task naming a group missing from the snapshot waits with that reason.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  queue.task("t1", "rg-gone", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonUnknownGroup);
  EXPECT_EQ(r.message, "resource group rg-gone does not exist");
}

TEST_F(CycleTest, AnUnusableRequestIsReportedNotTrusted) {
  // Replicas outside 1..1024 or two GPU types are refused with a reason.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", "gpu/nvidia-a100-80gb:8,gpu/nvidia-h100-80gb:8", {"c1"});
  queue.task("zero", "rg-b", "gpu/nvidia-a100-80gb:1", 0);
  queue.task("many", "rg-b", "cpu:1", 1025);
  queue.task("two", "rg-b", "gpu/nvidia-a100-80gb:1,gpu/nvidia-h100-80gb:1");
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "zero"), kReasonInvalidRequest);
  EXPECT_EQ(reason_code(plan, "many"), kReasonInvalidRequest);
  EXPECT_EQ(reason_code(plan, "two"), kReasonInvalidRequest);
}

TEST_F(CycleTest, ABlockedTaskDoesNotBlockSmallerOnesBehindIt) {
  // v1 has no head-of-line blocking: a task that fits is placed even when a
  // higher-priority one ahead of it does not.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", "gpu/nvidia-a100-80gb:64", {"c1"});
  queue.task("big", "rg-b", "gpu/nvidia-a100-80gb:16", 1, 100);
  queue.task("small", "rg-b", "gpu/nvidia-a100-80gb:1", 1, 1);
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "big"), kReasonNoNode);
  EXPECT_EQ(placed(plan), std::vector<std::string>{"small"});
}

TEST_F(CycleTest, TasksAlikeButForWhatTheyNameShareNoAnswer) {
  // Tasks of one group whose requests read the same figures (1 GPU of a type
  // no node offers, or the same cpu and one other resource) but name
  // different things are not of one class: each one's reason names its own.
  fleet.cluster("c1").node("n1", "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8,example.com/fpga:2", kA100Label);
  group("rg", "gpu/nvidia-a100-80gb:8,cpu:64", {"c1"});
  queue.task("x", "rg", "cpu:1,gpu/type-x:1");
  queue.task("y", "rg", "cpu:1,gpu/type-y:1");
  queue.task("fpga", "rg", "cpu:1,example.com/fpga:4");
  queue.task("asic", "rg", "cpu:1,example.com/asic:4");
  Plan plan = run();
  for (const auto& [id, named] : std::vector<std::pair<std::string, std::string>>{
           {"x", "gpu/type-x"}, {"y", "gpu/type-y"}, {"fpga", "example.com/fpga"}, {"asic", "example.com/asic"}}) {
    const PendingReason& r = reason(plan, id);
    EXPECT_NE(r.message.find(named), std::string::npos) << id << ": " << r.message;
  }
}

TEST_F(CycleTest, EveryQueuedTaskIsPlacedOrPendingWithAReason) {
  // The plan accounts for each queued task exactly once.
  busy_fleet();
  Plan plan = run();
  std::multiset<std::string> seen;
  for (const auto& p : plan.placements) seen.insert(p.task_id);
  for (const auto& p : plan.pending) {
    seen.insert(p.task_id);
    EXPECT_FALSE(p.reasons.empty()) << p.task_id;
    for (const auto& r : p.reasons) {
      EXPECT_FALSE(r.message.empty()) << p.task_id;
      EXPECT_FALSE(r.message_zh.empty()) << p.task_id;
    }
  }
  std::multiset<std::string> queued;
  for (const auto& q : queue.tasks) queued.insert(q.task.id);
  EXPECT_EQ(seen, queued);
  EXPECT_FALSE(plan.placements.empty());
  EXPECT_FALSE(plan.pending.empty());
}

TEST_F(CycleTest, TheSameInputGivesTheSamePlan) {
  // decide() is a function: twice the same input, twice the same plan.
  busy_fleet();
  EXPECT_EQ(describe(run()), describe(run()));
}

TEST_F(CycleTest, TheOrderOfTheInputDoesNotMatter) {
  // Shuffling the queue, nodes, clusters, groups and running work changes nothing.
  busy_fleet();
  const std::string expected = describe(run());
  // The scenario does exercise placements, preemptions and pending reasons.
  EXPECT_NE(expected.find("place "), std::string::npos);
  EXPECT_NE(expected.find("preempt "), std::string::npos) << expected;
  EXPECT_NE(expected.find("pending "), std::string::npos);
  std::mt19937 rng(20260101);
  for (int round = 0; round < 20; ++round) {
    std::shuffle(queue.tasks.begin(), queue.tasks.end(), rng);
    std::shuffle(fleet.snapshot.nodes.begin(), fleet.snapshot.nodes.end(), rng);
    std::shuffle(fleet.snapshot.clusters.begin(), fleet.snapshot.clusters.end(), rng);
    std::shuffle(fleet.snapshot.resource_groups.begin(), fleet.snapshot.resource_groups.end(), rng);
    std::shuffle(fleet.snapshot.running.begin(), fleet.snapshot.running.end(), rng);
    std::shuffle(fleet.snapshot.priority_classes.begin(), fleet.snapshot.priority_classes.end(), rng);
    for (auto& g : fleet.snapshot.resource_groups) std::shuffle(g.clusters.begin(), g.clusters.end(), rng);
    ASSERT_EQ(describe(run()), expected) << "round " << round;
  }
}

TEST_F(CycleTest, NoNodeIsOverbookedAndNoGpuIsShared) {
  // Over the busy fleet: per node, running + placed never exceed allocatable,
  // and no GPU index is handed out twice.
  busy_fleet();
  Plan plan = run();
  std::map<std::string, Resources> used;
  std::map<std::string, std::multiset<int>> gpus;
  auto add = [&](const std::string& cluster, const ReplicaPlacement& r, const Resources& per_replica) {
    used[cluster + "/" + r.node] += per_replica;
    for (int g : r.gpu_indices) gpus[cluster + "/" + r.node].insert(g);
  };
  for (const auto& w : fleet.snapshot.running) {
    for (const auto& r : w.placements) add(w.cluster_id, r, w.per_replica);
  }
  for (const auto& p : plan.placements) {
    for (const auto& r : p.placements) add(p.cluster_id, r, p.per_replica);
  }
  for (const auto& n : fleet.snapshot.nodes) {
    std::string key = n.cluster_id + "/" + n.name;
    EXPECT_TRUE(used[key].fits_in(n.allocatable)) << key << ": " << used[key].to_string();
    std::set<int> distinct(gpus[key].begin(), gpus[key].end());
    EXPECT_EQ(distinct.size(), gpus[key].size()) << key;
  }
}

}  // namespace
}  // namespace cp::sched::testing
