// Stage 3: cluster and node feasibility, and the reasons they record.
#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
const Labels kH100Label{{"gpu-type", "nvidia-h100-80gb"}};
constexpr std::string_view kA100Node = "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8";
constexpr std::string_view kH100Node = "cpu:64,memory:256Gi,gpu/nvidia-h100-80gb:8";

std::int64_t count(const PendingReason& r, const char* key) { return r.details.at(key).as_int64(); }

class FilterTest : public SchedTest {
 protected:
  // The group is set up per test (node selector, clusters) after the fleet.
  ResourceGroup& gpu_group(std::vector<std::string> clusters = {"c1"}) {
    return group("rg-b", "gpu/nvidia-a100-80gb:64,gpu/nvidia-h100-80gb:64", std::move(clusters));
  }
};

// ------------------------------------------------------------------ nodes

TEST_F(FilterTest, NodesInMaintenanceAreSkippedAndCounted) {
  // Maintenance by the admin flag or by the label both keep a node out.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  fleet.node("c1", "n1").maintenance = true;
  fleet.node("c1", "n2").label_overrides["maintenance"] = "true";
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonNoNode);
  EXPECT_EQ(r.message, "no node fits: 2 nodes; 2 in maintenance");
  EXPECT_EQ(count(r, "maintenance"), 2);
}

TEST_F(FilterTest, AShortOfNodesReasonIsToldApartByItsFigures) {
  // Two cycles over the same input give equal reasons (kept as figures,
  // compared without wording); one more node in maintenance gives another.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  fleet.node("c1", "n1").maintenance = true;
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:16");
  const Plan first = run();
  const Plan again = run();
  fleet.node("c1", "n2").maintenance = true;
  const Plan other = run();
  auto why = [](const Plan& plan) -> const Reasons& { return pending_of(plan, "t1")->reasons; };
  ASSERT_NE(pending_of(first, "t1"), nullptr);
  ASSERT_NE(pending_of(again, "t1"), nullptr);
  ASSERT_NE(pending_of(other, "t1"), nullptr);
  ASSERT_EQ(why(first).size(), 1u);
  ASSERT_NE(why(first).items().front(), why(again).items().front());
  EXPECT_TRUE(why(first).same_as(why(again)));
  EXPECT_FALSE(why(first).same_as(why(other)));
  EXPECT_EQ(why(first)[0].message, "no node fits: 2 nodes; 1 in maintenance, 1 lack free GPUs (need 16)");
  EXPECT_EQ(why(other)[0].message, "no node fits: 2 nodes; 2 in maintenance");
}

TEST_F(FilterTest, NotReadyNodesAreSkippedAndCounted) {
  // A node that is not Ready takes no work.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).node("n2", kA100Node, kA100Label);
  fleet.node("c1", "n1").ready = false;
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8");
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8");
  Plan plan = run();
  EXPECT_EQ(nodes_of(plan, "t1"), std::vector<std::string>{"n2"});
  EXPECT_EQ(count(reason(plan, "t2"), "not_ready"), 1);
  EXPECT_EQ(count(reason(plan, "t2"), "insufficient_gpu"), 1);
}

TEST_F(FilterTest, NodesOutsideTheGroupsNodeSelectorAreSkippedAndCounted) {
  // The group's node selector is matched against effective labels.
  fleet.cluster("c1")
      .node("n1", kA100Node, {{"gpu-type", "nvidia-a100-80gb"}, {"pool", "infer"}})
      .node("n2", kA100Node, {{"gpu-type", "nvidia-a100-80gb"}, {"pool", "infer"}});
  fleet.node("c1", "n2").label_overrides["pool"] = "train";
  gpu_group().node_selector = {{"pool", "train"}};
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8");
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8");
  Plan plan = run();
  EXPECT_EQ(nodes_of(plan, "t1"), std::vector<std::string>{"n2"});
  EXPECT_EQ(reason(plan, "t2").message,
            "no node fits: 2 nodes; 1 not matching node selector pool=train, 1 lack free GPUs (need 8)");
}

TEST_F(FilterTest, NodesOfAnotherGpuTypeAreSkippedAndCounted) {
  // The DESIGN.md example: 12 nodes, 3 in maintenance, 9 of another type.
  auto c1 = fleet.cluster("c1");
  for (int i = 0; i < 3; ++i) c1.node("a" + std::to_string(i), kA100Node, kA100Label);
  for (int i = 0; i < 9; ++i) c1.node("h" + std::to_string(i), kH100Node, kH100Label);
  for (int i = 0; i < 3; ++i) fleet.node("c1", "a" + std::to_string(i)).maintenance = true;
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.message, "no node fits: 12 nodes; 3 in maintenance, 9 lack gpu-type=nvidia-a100-80gb");
  EXPECT_EQ(r.message_zh, "没有可用节点：共 12 个节点；3 个处于维护中，9 个缺少 gpu-type=nvidia-a100-80gb");
  EXPECT_EQ(count(r, "nodes_total"), 12);
  EXPECT_EQ(count(r, "maintenance"), 3);
  EXPECT_EQ(count(r, "gpu_type_mismatch"), 9);
}

TEST_F(FilterTest, EachNodeIsCountedOnceUnderItsFirstFailingFilter) {
  // Counts add up to the total: a node failing several filters counts once,
  // under the first (ready, maintenance, selector, gpu type, cpu, memory, gpu, other).
  fleet.cluster("c1")
      .node("n1", kH100Node, kH100Label)                                     // gpu type
      .node("n2", kH100Node, kH100Label)                                     // not ready (and gpu type, maintenance)
      .node("n3", "cpu:4,memory:256Gi,gpu/nvidia-a100-80gb:8", kA100Label)   // cpu
      .node("n4", "cpu:64,memory:1Gi,gpu/nvidia-a100-80gb:8", kA100Label)    // memory
      .node("n5", "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:1", kA100Label)  // gpu
      .node("n6", kA100Node, kA100Label);                                    // other (no rdma/hca)
  fleet.node("c1", "n2").ready = false;
  fleet.node("c1", "n2").maintenance = true;
  group("rg-b", "gpu/nvidia-a100-80gb:64,rdma/hca:8", {"c1"});
  queue.task("t1", "rg-b", "cpu:8,memory:8Gi,gpu/nvidia-a100-80gb:2,rdma/hca:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(count(r, "nodes_total"), 6);
  EXPECT_EQ(count(r, "not_ready"), 1);
  EXPECT_EQ(count(r, "maintenance"), 0);
  EXPECT_EQ(count(r, "selector_mismatch"), 0);
  EXPECT_EQ(count(r, "gpu_type_mismatch"), 1);
  EXPECT_EQ(count(r, "insufficient_cpu"), 1);
  EXPECT_EQ(count(r, "insufficient_memory"), 1);
  EXPECT_EQ(count(r, "insufficient_gpu"), 1);
  EXPECT_EQ(count(r, "insufficient_other"), 1);
  EXPECT_EQ(count(r, "nodes_fit"), 0);
}

TEST_F(FilterTest, AGpuTypeIsRecognisedByDeviceModelWithoutTheLabel) {
  // A node without the gpu-type label qualifies by its devices' model.
  fleet.cluster("c1").node("n1", kA100Node).devices("nvidia-a100-80gb", {0, 1, 2, 3, 4, 5, 6, 7});
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2");
  EXPECT_EQ(nodes_of(run(), "t1"), std::vector<std::string>{"n1"});
}

TEST_F(FilterTest, FreeCapacityCountsRunningWorkOfEveryGroup) {
  // A node's free capacity is what no running replica holds, whoever runs it.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  gpu_group();
  group("rg-other", "gpu/nvidia-a100-80gb:8", {"c1"});
  fleet.running("r1", "rg-other", "c1", "cpu:60,gpu/nvidia-a100-80gb:1", {{0, "n1", {0}}});
  queue.task("t1", "rg-b", "cpu:8,gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  EXPECT_EQ(count(reason(plan, "t1"), "insufficient_cpu"), 1);
}

// --------------------------------------------------------------- clusters

TEST_F(FilterTest, APinnedTaskGoesOnlyToItsCluster) {
  // task.cluster restricts placement to that cluster, even if another ranks better.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  fleet.cluster("c2").node("n1", kA100Node, kA100Label);
  gpu_group({"c1", "c2"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").pinned("c2");
  Plan plan = run();
  EXPECT_EQ(placement_of(plan, "t1")->cluster_id, "c2");
}

TEST_F(FilterTest, APinnedClusterOutsideTheGroupIsNoCluster) {
  // Pinning a cluster the group does not have leaves the task without one.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  fleet.cluster("c9").node("n1", kA100Node, kA100Label);
  gpu_group({"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").pinned("c9");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonNoCluster);
  EXPECT_EQ(r.message, "pinned cluster c9 is not in resource group rg-b (clusters: c1)");
}

TEST_F(FilterTest, TheClusterSelectorMatchesClusterLabels) {
  // Only clusters whose labels match the task's cluster selector are used.
  fleet.cluster("c1", {{"region", "east"}}).node("n1", kA100Node, kA100Label);
  fleet.cluster("c2", {{"region", "west"}}).node("n1", kA100Node, kA100Label);
  gpu_group({"c1", "c2"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").cluster_selector({{"region", "west"}});
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:1").cluster_selector({{"region", "north"}});
  Plan plan = run();
  EXPECT_EQ(placement_of(plan, "t1")->cluster_id, "c2");
  const PendingReason& r = reason(plan, "t2");
  EXPECT_EQ(r.code, kReasonNoCluster);
  EXPECT_EQ(r.message, "no cluster available in rg-b: 2 clusters; 2 not matching cluster selector region=north");
  EXPECT_EQ(count(r, "selector_mismatch"), 2);
}

TEST_F(FilterTest, AnOfflineClusterIsReportedWithItsReason) {
  // With its only cluster offline, a task says which cluster and why.
  fleet.cluster("c1")
      .node("n1", kA100Node, kA100Label)
      .state(ClusterState::offline, "credential_expired", "agent credential expired");
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonClusterOffline);
  EXPECT_EQ(r.message, "cluster c1 offline: credential_expired (agent credential expired)");
  EXPECT_EQ(r.details.at("state_reason").as_string(), "credential_expired");
}

TEST_F(FilterTest, DrainingAndUnregisteredClustersTakeNoWork) {
  // Draining clusters and clusters the group names but that never registered
  // get one cluster_offline reason each.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).state(ClusterState::draining, "admin_drain");
  gpu_group({"c1", "c-ghost"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->reasons.size(), 2u);
  EXPECT_EQ(p->reasons[0].message, "cluster c-ghost offline: not_registered");
  EXPECT_EQ(p->reasons[1].message, "cluster c1 draining: admin_drain");
}

TEST_F(FilterTest, ADegradedClusterStillTakesWork) {
  // Degraded is a warning, not an outage.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label).state(ClusterState::degraded, "engine_error");
  gpu_group();
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  EXPECT_EQ(reason_code(run(), "t1"), "(placed)");
}

TEST_F(FilterTest, AnOfflineClusterIsMentionedWhenTheOthersAreFull) {
  // No node fits in the online clusters: the offline one is named as well.
  fleet.cluster("c1").node("n1", kA100Node, kA100Label);
  fleet.cluster("c2").node("n1", kA100Node, kA100Label).state(ClusterState::offline, "unreachable");
  gpu_group({"c1", "c2"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:16");
  Plan plan = run();
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->reasons.size(), 2u);
  EXPECT_EQ(p->reasons[0].code, kReasonNoNode);
  EXPECT_EQ(p->reasons[1].code, kReasonClusterOffline);
}

}  // namespace
}  // namespace cp::sched::testing
