// Stage 4: ranking, gang selection, GPU indices, "gpu/any".
#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
const Labels kH100Label{{"gpu-type", "nvidia-h100-80gb"}};
constexpr std::string_view kA100Node = "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8";
constexpr std::string_view kH100Node = "cpu:64,memory:256Gi,gpu/nvidia-h100-80gb:8";
constexpr std::string_view kQuota = "gpu/nvidia-a100-80gb:64,gpu/nvidia-h100-80gb:64";

std::vector<int> gpus_of(const Plan& plan, std::string_view task_id, std::size_t replica = 0) {
  const Placement* p = placement_of(plan, task_id);
  if (p == nullptr || replica >= p->placements.size()) return {{-1}};
  return p->placements[replica].gpu_indices;
}

class PlacementTest : public SchedTest {};

// ---------------------------------------------------------------- ranking

TEST_F(PlacementTest, BinpackPrefersTheNodeWithTheFewestGpusLeft) {
  // Binpack fills the busier node, keeping whole nodes free.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n2", {0, 1}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  EXPECT_EQ(nodes_of(run(), "t1"), std::vector<std::string>{"n2"});
}

TEST_F(PlacementTest, SpreadPrefersTheNodeWithTheMostGpusLeft) {
  // Spread goes to the emptier node.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"}, PlacementPolicy::spread);
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n1", {0, 1}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  EXPECT_EQ(nodes_of(run(), "t1"), std::vector<std::string>{"n2"});
}

TEST_F(PlacementTest, BinpackPutsSeveralReplicasOnOneNode) {
  // Binpack stacks a gang's replicas on one node while it has room.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:4", 2);
  Plan plan = run();
  EXPECT_EQ(nodes_of(plan, "t1"), (std::vector<std::string>{"n1", "n1"}));
  EXPECT_EQ(gpus_of(plan, "t1", 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(gpus_of(plan, "t1", 1), (std::vector<int>{4, 5, 6, 7}));
}

TEST_F(PlacementTest, SpreadPutsReplicasOnDifferentNodes) {
  // Spread places each replica on the node with the most left at that moment.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"}, PlacementPolicy::spread);
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2", 2);
  EXPECT_EQ(nodes_of(run(), "t1"), (std::vector<std::string>{"n1", "n2"}));
}

TEST_F(PlacementTest, TiesGoToTheSmallestClusterIdThenNodeName) {
  // Equal scores: (cluster id, node name) decides, whatever the snapshot order.
  fleet.cluster("c2").node("a", kA100Node, kA100Label);
  fleet.cluster("c1").node("z", kA100Node, kA100Label).node("y", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c2", "c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  EXPECT_EQ(placement_of(plan, "t1")->cluster_id, "c1");
  EXPECT_EQ(nodes_of(plan, "t1"), std::vector<std::string>{"y"});
}

TEST_F(PlacementTest, AOneReplicaTaskGetsTheBestNodeOfAllClusters) {
  // Clusters are tried in the order of their best node, not in list order.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  fleet.cluster("c2").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1", "c2"});
  fleet.running("r1", "rg-b", "c2", "gpu/nvidia-a100-80gb:6", {{0, "n1", {0, 1, 2, 3, 4, 5}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  EXPECT_EQ(placement_of(plan, "t1")->cluster_id, "c2");
}

TEST_F(PlacementTest, GpuWorkOfDifferentProjectGroupsIsKeptApartWhenThereIsAChoice) {
  // Binpack alone would pick n2 (fewer GPUs left); n2 runs another project
  // group's GPU work, so n1 is taken while it has room.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n2", {0, 1}}}).project_group = "proj-other";
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2").owner("proj-b", "alice");
  EXPECT_EQ(nodes_of(run(), "t1"), std::vector<std::string>{"n1"});
}

TEST_F(PlacementTest, AntiAffinityIsSoftAndSharesANodeWhenNothingElseFits) {
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n1", {0, 1}}}).project_group = "proj-other";
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2").owner("proj-b", "alice");
  EXPECT_EQ(nodes_of(run(), "t1"), std::vector<std::string>{"n1"});
}

// ------------------------------------------------------- fallback shapes

TEST_F(PlacementTest, AFallbackShapeIsTriedOnlyAfterItsWait) {
  // No A100 is free; an H100 is. Before 10 minutes the task waits for an
  // A100 and says when the fallback opens; after, it runs on the H100.
  fleet.cluster("c1").node("a", kA100Node, kA100Label).node("h", kH100Node, kH100Label);
  group("rg-b", kQuota, {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:8", {{0, "a", {0, 1, 2, 3, 4, 5, 6, 7}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2").fallback(600, "gpu/nvidia-h100-80gb:2");

  Plan before = run(kT0 + 599'000);
  EXPECT_TRUE(before.placements.empty());
  const Pending* p = pending_of(before, "t1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reasons.front().code, kReasonNoNode);
  EXPECT_EQ(p->reasons.back().code, kReasonFallback);
  const std::string opens_at = format_time(kT0 + 600'000);
  EXPECT_EQ(p->reasons.back().message, "fallback shapes: gpu/nvidia-h100-80gb=2 (from " + opens_at + ")");
  EXPECT_EQ(p->reasons.back().message_zh, "备选规格：gpu/nvidia-h100-80gb=2（自 " + opens_at + " 起）");
  EXPECT_EQ(p->reasons.back().details.at("shapes").as_array().at(0).at("opens_at").as_string(), opens_at);
  // A second earlier: the same reason, word for word (nothing counts down).
  const Plan earlier = run(kT0 + 598'000);
  ASSERT_NE(pending_of(earlier, "t1"), nullptr);
  EXPECT_EQ(pending_of(earlier, "t1")->reasons.back().message, p->reasons.back().message);

  Plan after = run(kT0 + 600'000);
  const Placement* pl = placement_of(after, "t1");
  ASSERT_NE(pl, nullptr) << describe(after);
  EXPECT_EQ(pl->shape, 1);
  EXPECT_EQ(pl->per_replica.get("gpu/nvidia-h100-80gb"), 2);
  EXPECT_EQ(nodes_of(after, "t1"), std::vector<std::string>{"h"});
}

TEST_F(PlacementTest, ThePrimaryShapeIsPreferredWhenItFits) {
  fleet.cluster("c1").node("a", kA100Node, kA100Label).node("h", kH100Node, kH100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2").fallback(600, "gpu/nvidia-h100-80gb:2");
  Plan plan = run(kT0 + 3600'000);
  EXPECT_EQ(placement_of(plan, "t1")->shape, 0);
  EXPECT_EQ(nodes_of(plan, "t1"), std::vector<std::string>{"a"});
}

TEST_F(PlacementTest, FallbacksAreTriedInOrderAndEachSaysWhyNot) {
  // Shape 1 (H100) has no quota; shape 2 (A100 x1) fits.
  fleet.cluster("c1").node("a", kA100Node, kA100Label).node("h", kH100Node, kH100Label);
  group("rg-b", "gpu/nvidia-a100-80gb:3", {"c1"});
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "a", {0, 1}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2")
      .fallback(60, "gpu/nvidia-h100-80gb:2")
      .fallback(120, "gpu/nvidia-a100-80gb:1");
  Plan mid = run(kT0 + 90'000);
  const Pending* p = pending_of(mid, "t1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reasons[0].code, kReasonQuota);
  EXPECT_EQ(p->reasons[1].details.at("shape").as_int64(), 1);
  EXPECT_EQ(p->reasons[1].message.rfind("with fallback shape 1: quota:", 0), 0u) << p->reasons[1].message;
  Plan late = run(kT0 + 120'000);
  ASSERT_NE(placement_of(late, "t1"), nullptr) << describe(late);
  EXPECT_EQ(placement_of(late, "t1")->shape, 2);
}

// ------------------------------------------------------------------ gangs

TEST_F(PlacementTest, AGangIsNeverSplitAcrossClusters) {
  // Room for the gang exists only across two clusters: nothing is placed.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  fleet.cluster("c2").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1", "c2"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8", 2);
  Plan plan = run();
  EXPECT_TRUE(plan.placements.empty());
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonGang);
  EXPECT_EQ(r.message,
            "no node fits: 2 nodes; 2 could take a replica, but no cluster has room for all 2 replicas together");
  EXPECT_EQ(r.details.at("nodes_fit").as_int64(), 2);
}

TEST_F(PlacementTest, AGangSpansNodesOfOneCluster) {
  // Replicas that do not fit one node go to several nodes of the same cluster.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8", 2);
  Plan plan = run();
  const Placement* p = placement_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->cluster_id, "c1");
  EXPECT_EQ(nodes_of(plan, "t1"), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(p->placements[1].replica, 1);
  EXPECT_EQ(gpus_of(plan, "t1", 1), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(PlacementTest, AGangMovesOnToAClusterThatHoldsItWhole) {
  // The best-ranked cluster cannot take the whole gang; the next one can.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  fleet.cluster("c2").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1", "c2"});
  fleet.running("r1", "rg-b", "c2", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:4", 3);
  Plan plan = run();
  EXPECT_EQ(placement_of(plan, "t1")->cluster_id, "c1");
}

TEST_F(PlacementTest, AFailedGangLeavesNothingBehindForTheNextTask) {
  // Replicas tried and released in one cluster do not hold its nodes.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8", 2, 100);
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8", 1, 1);
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "t1"), kReasonGang);
  EXPECT_EQ(nodes_of(plan, "t2"), std::vector<std::string>{"n1"});
}

// ------------------------------------------------------------ GPU indices

TEST_F(PlacementTest, GpuIndicesAvoidThoseOfRunningWork) {
  // The lowest indices that no running replica holds are assigned.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  group("rg-other", kQuota, {"c1"});
  fleet.running("r1", "rg-other", "c1", "gpu/nvidia-a100-80gb:3", {{0, "n1", {0, 1, 4}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:3");
  EXPECT_EQ(gpus_of(run(), "t1"), (std::vector<int>{2, 3, 5}));
}

TEST_F(PlacementTest, GpuIndicesAvoidThoseOfThisCycle) {
  // Two tasks of one cycle on one node never share a GPU.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  EXPECT_EQ(gpus_of(plan, "t1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpus_of(plan, "t2"), (std::vector<int>{2, 3}));
}

TEST_F(PlacementTest, GpuIndicesComeFromTheReportedDevices) {
  // A node that reports its devices is given their indices, not 0..N-1.
  fleet.cluster("c1").node("n1", "cpu:64,gpu/nvidia-a100-80gb:4", kA100Label).devices("nvidia-a100-80gb", {7, 5, 6, 4});
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  EXPECT_EQ(gpus_of(run(), "t1"), (std::vector<int>{4, 5}));
}

TEST_F(PlacementTest, AnAbsurdGpuCountFromAnAgentIsHarmless) {
  // A node claiming 2^40 GPUs without devices is still scheduled, cheaply.
  fleet.cluster("c1").node("n1", "cpu:64,gpu/nvidia-a100-80gb:1099511627776", kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  EXPECT_EQ(gpus_of(run(), "t1"), (std::vector<int>{0, 1}));
}

TEST_F(PlacementTest, ATaskWithoutGpusGetsNoGpuIndices) {
  // cpu-only work holds no GPU device.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "cpu:2,memory:1Gi");
  EXPECT_TRUE(gpus_of(run(), "t1").empty());
}

// ---------------------------------------------------------------- gpu/any

TEST_F(PlacementTest, GpuAnyIsResolvedToTheTypePlacedOn) {
  // A bare GPU count lands on any GPU node and is charged as that node's type.
  fleet.cluster("c1").node("n0", "cpu:64,memory:256Gi").node("n1", kH100Node, kH100Label);
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "cpu:1,gpu/any:2");
  Plan plan = run();
  const Placement* p = placement_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->placements[0].node, "n1");
  EXPECT_EQ(p->per_replica, res("cpu:1,gpu/nvidia-h100-80gb:2"));
}

TEST_F(PlacementTest, GpuAnyIsAdmittedAgainstTheConcreteType) {
  // The best node's type has no quota in the group: the type with quota is used.
  fleet.cluster("c1").node("a1", kA100Node, kA100Label).node("h1", kH100Node, kH100Label);
  group("rg-b", "gpu/nvidia-h100-80gb:8", {"c1"});
  group("rg-other", kQuota, {"c1"});
  fleet.running("r1", "rg-other", "c1", "gpu/nvidia-a100-80gb:4", {{0, "a1", {0, 1, 2, 3}}});  // a1 ranks first
  queue.task("t1", "rg-b", "gpu/any:2");
  Plan plan = run();
  const Placement* p = placement_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->placements[0].node, "h1");
  EXPECT_EQ(p->per_replica, res("gpu/nvidia-h100-80gb:2"));
}

TEST_F(PlacementTest, GpuAnyWithoutQuotaForAnyTypeWaitsOnQuota) {
  // Every GPU type with room is refused by quota: the reason is quota, per type.
  fleet.cluster("c1").node("a1", kA100Node, kA100Label).node("h1", kH100Node, kH100Label);
  group("rg-b", "cpu:64", {"c1"});
  queue.task("t1", "rg-b", "gpu/any:1");
  Plan plan = run();
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->reasons.size(), 2u);
  EXPECT_EQ(p->reasons[0].code, kReasonQuota);
  EXPECT_EQ(p->reasons[0].details.at("resource").as_string(), "gpu/nvidia-a100-80gb");
  EXPECT_EQ(p->reasons[1].details.at("resource").as_string(), "gpu/nvidia-h100-80gb");
}

TEST_F(PlacementTest, GpuAnyNeedsANodeWithGpus) {
  // Nodes without GPUs are counted as a GPU type mismatch for "gpu/any".
  fleet.cluster("c1").node("n0", "cpu:64,memory:256Gi");
  group("rg-b", kQuota, {"c1"});
  queue.task("t1", "rg-b", "gpu/any:1");
  Plan plan = run();
  EXPECT_EQ(reason(plan, "t1").message, "no node fits: 1 node; 1 without GPUs");
}

}  // namespace
}  // namespace cp::sched::testing
