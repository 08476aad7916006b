// The storage-pool filter: a task bound to a pool (Task::storage_pool, set
// when an attempt is Lost or a checkpointing step is first placed) is placed
// only on clusters of that pool, and says so when none of them can take it.
#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
constexpr std::string_view kA100Node = "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8";

std::int64_t count(const PendingReason& r, const char* key) { return r.details.at(key).as_int64(); }

class StoragePoolTest : public SchedTest {
 protected:
  // c1, c2 in pool p1; c3 in pool p2; one group over all three, spread, so
  // that an unbound task goes to the emptiest node wherever it is.
  void SetUp() override {
    fleet.cluster("c1").storage_pool("p1").node("n1", kA100Node, kA100Label);
    fleet.cluster("c2").storage_pool("p1").node("n1", kA100Node, kA100Label);
    fleet.cluster("c3").storage_pool("p2").node("n1", kA100Node, kA100Label);
    group("rg-b", "gpu/nvidia-a100-80gb:64", {"c1", "c2", "c3"}, PlacementPolicy::spread);
  }
  // Work holding `gpus` GPUs of cluster/n1.
  void busy(const std::string& cluster, int gpus) {
    std::vector<int> idx;
    for (int i = 0; i < gpus; ++i) idx.push_back(i);
    fleet.running("w-" + cluster, "rg-b", cluster, "gpu/nvidia-a100-80gb:" + std::to_string(gpus),
                  {ReplicaPlacement{0, "n1", idx}});
  }
};

TEST_F(StoragePoolTest, ABoundTaskGoesOnlyToClustersOfItsPool) {
  // c3 (pool p2) is the emptiest: the unbound task goes there, the bound one to c2, the emptiest of p1.
  busy("c1", 6);
  busy("c2", 4);
  queue.task("bound", "rg-b", "gpu/nvidia-a100-80gb:1").storage_pool("p1");
  queue.task("free", "rg-b", "gpu/nvidia-a100-80gb:1").created_at(kT0 + 1);
  Plan plan = run();
  ASSERT_NE(placement_of(plan, "bound"), nullptr);
  EXPECT_EQ(placement_of(plan, "bound")->cluster_id, "c2");
  ASSERT_NE(placement_of(plan, "free"), nullptr);
  EXPECT_EQ(placement_of(plan, "free")->cluster_id, "c3");
}

TEST_F(StoragePoolTest, WithNoClusterOfThePoolOnlineTheTaskWaitsWithTheStoragePoolReason) {
  // c1 unreachable, c2 draining: the task waits although c3 (another pool) is
  // idle; the pool reason comes first, then the pool's own outages; c3's state is never its news.
  fleet.cluster("c1").state(ClusterState::offline, "unreachable", "no sync from the agent");
  fleet.cluster("c2").state(ClusterState::draining, "admin_drain");
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").storage_pool("p1");
  Plan plan = run();
  EXPECT_TRUE(plan.placements.empty());
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->reasons.size(), 3u);
  const PendingReason& r = p->reasons[0];
  EXPECT_EQ(r.code, kReasonStoragePool);
  EXPECT_EQ(r.message,
            "storage pool p1 has no cluster online: the task's checkpoints and data are there; 2 clusters of the "
            "pool offline (c1, c2); 1 cluster in other pools not considered (c3)");
  EXPECT_EQ(r.message_zh,
            "存储池 p1 中没有在线集群：任务的检查点和数据位于该池；该池 2 个集群离线（c1、c2）；"
            "其他存储池的 1 个集群不予考虑（c3）");
  EXPECT_EQ(r.details.at("storage_pool").as_string(), "p1");
  EXPECT_EQ(count(r, "clusters_excluded"), 1);
  EXPECT_EQ(count(r, "pool_offline"), 2);
  EXPECT_EQ(count(r, "usable"), 0);
  EXPECT_EQ(p->reasons[1].code, kReasonClusterOffline);
  EXPECT_EQ(p->reasons[1].details.at("cluster").as_string(), "c1");
  EXPECT_EQ(p->reasons[2].details.at("cluster").as_string(), "c2");
}

TEST_F(StoragePoolTest, APoolWithNoClusterInTheGroupIsSaidSo) {
  // Bound to a pool none of the group's clusters is in: every cluster is counted as excluded.
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").storage_pool("p9");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonStoragePool);
  EXPECT_EQ(r.message,
            "storage pool p9 has no cluster in resource group rg-b that the task may use: the task's checkpoints "
            "and data are there; 3 clusters in other pools not considered (c1, c2, c3)");
  EXPECT_EQ(count(r, "clusters_excluded"), 3);
}

TEST_F(StoragePoolTest, WhenThePoolIsFullTheNodeReasonComesFirstThenThePoolNote) {
  // p1 has no room, p2 has: the task waits, counted over p1's nodes only, and notes the pool kept c3 out.
  busy("c1", 8);
  busy("c2", 8);
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1").storage_pool("p1");
  Plan plan = run();
  EXPECT_TRUE(plan.placements.empty());
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  ASSERT_GE(p->reasons.size(), 2u);
  EXPECT_EQ(p->reasons[0].code, kReasonNoNode);
  EXPECT_EQ(count(p->reasons[0], "nodes_total"), 2);
  EXPECT_EQ(count(p->reasons[0], "insufficient_gpu"), 2);
  const PendingReason& note = p->reasons[1];
  EXPECT_EQ(note.code, kReasonStoragePool);
  EXPECT_EQ(note.message,
            "bound to storage pool p1, where its checkpoints and data are: 1 cluster in other pools not considered "
            "(c3)");
  EXPECT_EQ(count(note, "usable"), 2);
}

TEST_F(StoragePoolTest, BoundAndUnboundTwinsAreNotOneClass) {
  // A bound task that failed does not make an otherwise identical unbound one fail in the same cycle.
  busy("c1", 8);
  busy("c2", 8);
  queue.task("bound", "rg-b", "gpu/nvidia-a100-80gb:1").storage_pool("p1");
  queue.task("free", "rg-b", "gpu/nvidia-a100-80gb:1").created_at(kT0 + 1);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"free"});
  EXPECT_EQ(placement_of(plan, "free")->cluster_id, "c3");
  EXPECT_EQ(reason_code(plan, "bound"), std::string(kReasonNoNode));
}

TEST_F(StoragePoolTest, AnUnboundTaskIsToldNothingAboutPools) {
  // Without a binding every cluster is considered and no pool reason appears.
  busy("c1", 8);
  busy("c2", 8);
  busy("c3", 8);
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1");
  Plan plan = run();
  const Pending* p = pending_of(plan, "t1");
  ASSERT_NE(p, nullptr);
  for (const auto& r : p->reasons) EXPECT_NE(r.code, kReasonStoragePool);
  EXPECT_EQ(count(p->reasons[0], "nodes_total"), 3);
}

}  // namespace
}  // namespace cp::sched::testing
