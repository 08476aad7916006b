// Failover inside the storage pool (DESIGN.md "Agent protocol", fencing): a
// task whose attempt is Lost is bound to the pool of the cluster that lost it
// and requeues only onto clusters of that pool; while none of them can take
// it, it waits with the storage_pool reason. The fixture's c1 and c2 are in
// pool-a; this file adds c3 in pool-b to the same resource group.
#include "control_plane_fixture.h"
#include "server/holdings.h"

namespace cp::testing {
namespace {

constexpr std::string_view kThirdCluster = R"(
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c3}
spec: {executor: local, storage_pool: pool-b}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1, c2, c3]
  quota:
    gpu/a100: {guaranteed: 4}
)";

class StoragePoolTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    ControlPlaneTest::SetUp();
    add_to_fleet(kThirdCluster);
    a1_ = connect("c1").first;
    a2_ = connect("c2").first;
    a3_ = connect("c3").first;
  }

  // A task placed on c1 (the only cluster with nodes yet) and running there; c2 (8 GPUs) and c3 (2 GPUs)
  // then report their nodes. Binpacking prefers c3 (least left), so only the pool keeps the task off it.
  Running running_on_c1(const std::string& extra = "") {
    Running r = running_on(a1_, extra);
    EXPECT_EQ(task(r.task_id).assigned_cluster, "c1");
    sync(a2_, {}, 8);
    sync(a3_, {}, 2);
    return r;
  }

  // c1 silent past lost_after; the clusters in `alive` keep syncing.
  void lose_c1(const std::vector<Principal*>& alive) {
    clock_.advance_ms(41'000);
    for (auto* a : alive) sync(*a, {}, a == &a3_ ? 2 : 8);
    ASSERT_TRUE(cp_->check_liveness().ok());
    ASSERT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::offline);
  }

  Principal a1_, a2_, a3_;
};

TEST_F(StoragePoolTest, ALostTaskRequeuesOnlyOntoClustersOfTheSamePool) {
  // Lost with c1 (pool-a): bound to pool-a in the requeue, placed on c2 although binpacking would pick c3.
  auto r = running_on_c1();
  EXPECT_EQ(task(r.task_id).storage_pool, "");  // a step without checkpoints is not bound by its placement
  lose_c1({&a2_, &a3_});
  Task queued = task(r.task_id);
  EXPECT_EQ(queued.state, TaskState::Queued);
  EXPECT_EQ(queued.storage_pool, "pool-a");
  ASSERT_FALSE(queued.reasons.empty());
  EXPECT_EQ(queued.reasons[0].code, "requeued_after_loss");
  EXPECT_EQ(queued.reasons[0].details.at("storage_pool").as_string(), "pool-a");
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task moved = task(r.task_id);
  EXPECT_EQ(moved.state, TaskState::Dispatched);
  EXPECT_EQ(moved.assigned_cluster, "c2");
  EXPECT_EQ(moved.storage_pool, "pool-a");
  EXPECT_TRUE(sync(a3_, {}, 2).start.empty());
  EXPECT_EQ(sync(a2_, {}).start.size(), 1u);
}

TEST_F(StoragePoolTest, WithNoClusterOfThePoolOnlineTheTaskWaitsAndExplainsWhy) {
  // c1 and c2 (all of pool-a) go silent, c3 keeps talking and is idle: the task waits, and says so in
  // English and Chinese; once c2 is back it runs there.
  auto r = running_on_c1();
  lose_c1({&a3_});
  ASSERT_EQ(cp_->get_cluster(admin_, "c2")->state, ClusterState::offline);
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task waiting = task(r.task_id);
  EXPECT_EQ(waiting.state, TaskState::Queued);
  ASSERT_GE(waiting.reasons.size(), 1u);
  EXPECT_EQ(waiting.reasons[0].code, "storage_pool");
  EXPECT_EQ(waiting.reasons[0].details.at("clusters_excluded").as_int64(), 1);
  EXPECT_TRUE(sync(a3_, {}, 2).start.empty());
  auto explain = cp_->explain_task(alice_, r.task_id);
  ASSERT_TRUE(explain.ok());
  std::string summary(explain->at("summary").as_string()), summary_zh(explain->at("summary_zh").as_string());
  EXPECT_NE(summary.find("storage pool pool-a has no cluster online"), std::string::npos) << summary;
  EXPECT_NE(summary.find("1 cluster in other pools not considered (c3)"), std::string::npos) << summary;
  EXPECT_NE(summary_zh.find("存储池 pool-a 中没有在线集群"), std::string::npos) << summary_zh;

  sync(a2_, {});  // c2 is back
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(r.task_id).assigned_cluster, "c2");
}

TEST_F(StoragePoolTest, AnAttemptItsAgentReportsLostBindsTheTaskToo) {
  // The agent itself reports the attempt Lost (fenced, or its outcome unknown): same binding, same pool.
  auto r = running_on_c1();
  sync(a1_, {AttemptReport{r.order.attempt_id, r.order.epoch, AttemptState::Lost, std::nullopt, clock_.now_ms(),
                           clock_.now_ms(), "outcome unknown"}});
  Task queued = task(r.task_id);
  EXPECT_EQ(queued.state, TaskState::Queued);
  EXPECT_EQ(queued.storage_pool, "pool-a");
}

TEST_F(StoragePoolTest, ACheckpointingStepIsBoundAtItsFirstPlacement) {
  // Its checkpoints are written to the pool of the cluster it first runs on, from the first attempt.
  auto r = running_on_c1("      checkpoint: true\n");
  EXPECT_EQ(task(r.task_id).storage_pool, "pool-a");
}

TEST_F(StoragePoolTest, ApplyRefusesAPlacementOutsideTheTasksPool) {
  // The apply-time re-check: a plan made on an older snapshot cannot put a bound task in another pool.
  running_on_c1();
  Task t;
  t.id = "t-x";
  t.resource_group = "rg-a";
  t.state = TaskState::Queued;
  t.storage_pool = "pool-a";
  sched::Placement pl;
  pl.task_id = t.id;
  pl.per_replica = Resources::parse_or_die("cpu:1,gpu/a100:1");
  pl.placements = {ReplicaPlacement{0, "c3-n1", {1}}};
  sched::Placement on_c3 = pl, on_c2 = pl;
  on_c3.cluster_id = "c3";
  on_c2.cluster_id = "c2";
  on_c2.placements = {ReplicaPlacement{0, "c2-n1", {1}}};
  std::optional<std::string> to_c3, to_c2, unbound_to_c3;
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
                      LiveWork live;
                      CP_TRY(live.refresh(tx, nullptr, 0, 0));
                      CP_ASSIGN(auto held, internal::Holdings::load(tx, live, {on_c3, on_c2}));
                      pl.cluster_id = "c3";
                      to_c3 = held->recheck(t, pl);
                      Task unbound = t;
                      unbound.storage_pool.clear();
                      unbound_to_c3 = held->recheck(unbound, pl);
                      pl.cluster_id = "c2";
                      pl.placements = {ReplicaPlacement{0, "c2-n1", {1}}};
                      to_c2 = held->recheck(t, pl);
                      return {};
                    })
                  .ok());
  ASSERT_TRUE(to_c3.has_value());
  EXPECT_EQ(*to_c3, "cluster c3 is in storage pool pool-b, the task is bound to pool-a");
  EXPECT_FALSE(unbound_to_c3.has_value()) << *unbound_to_c3;
  EXPECT_FALSE(to_c2.has_value()) << *to_c2;
}

}  // namespace
}  // namespace cp::testing
