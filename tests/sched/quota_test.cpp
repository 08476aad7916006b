// Stage 2: admission against the resource group's quota.
#include "harness.h"
#include "sched/admission.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};

// Plenty of nodes, so that quota is the only thing that can say no.
class QuotaTest : public SchedTest {
 protected:
  void SetUp() override {
    auto c1 = fleet.cluster("c1");
    for (int i = 1; i <= 4; ++i) {
      c1.node("n" + std::to_string(i), "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8", kA100Label);
    }
  }
  std::int64_t placed_gpus(const Plan& plan) {
    std::int64_t n = 0;
    for (const auto& p : plan.placements) n += p.per_replica.gpus() * static_cast<std::int64_t>(p.placements.size());
    return n;
  }
};

TEST_F(QuotaTest, PlacementsOfOneCycleNeverExceedTheQuota) {
  // Tasks placed earlier in the cycle count against the quota of later ones.
  group("rg-b", "gpu/nvidia-a100-80gb:16", {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8");
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:8");
  queue.task("t3", "rg-b", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  EXPECT_EQ(placed(plan), (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(reason_code(plan, "t3"), kReasonQuota);
  EXPECT_LE(placed_gpus(plan), 16);
}

TEST_F(QuotaTest, RunningWorkCountsAgainstTheQuota) {
  // Usage is per_replica x replicas of the group's running work; a task that
  // would go past the guaranteed amount waits, with the figures.
  group("rg-proj-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  fleet.running("r1", "rg-proj-b", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n1", {0, 1, 2, 3}}, {1, "n2", {0, 1, 2, 3}}});
  queue.task("t1", "rg-proj-b", "gpu/nvidia-a100-80gb:2");
  Plan plan = run();
  const PendingReason& r = reason(plan, "t1");
  EXPECT_EQ(r.code, kReasonQuota);
  EXPECT_EQ(r.message, "quota: gpu/nvidia-a100-80gb 8 of 8 in use by rg-proj-b (pg-rg-proj-b 8), this task asks for 2");
  EXPECT_EQ(r.message_zh, "配额不足：rg-proj-b 的 gpu/nvidia-a100-80gb 已用 8/8（pg-rg-proj-b 8），本任务申请 2");
  EXPECT_EQ(dump(r.details), R"({"resource":"gpu/nvidia-a100-80gb","used":8,"requested":2,"limit":8,)"
                             R"("guaranteed":8,"resource_group":"rg-proj-b","holders":[{"name":"pg-rg-proj-b","amount":8}]})");
}

TEST_F(QuotaTest, OtherGroupsRunningWorkDoesNotCount) {
  // Quota is per group: what another group runs is not charged to this one.
  group("rg-a", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  fleet.running("r1", "rg-a", "c1", "gpu/nvidia-a100-80gb:8", {{0, "n1", {0, 1, 2, 3, 4, 5, 6, 7}}});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:8");
  EXPECT_EQ(reason_code(run(), "t1"), "(placed)");
}

TEST_F(QuotaTest, TheRequestIsPerReplicaTimesReplicas) {
  // A gang is charged for all its replicas: 3 x 3 GPUs does not fit 8.
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:3", 3);
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "t1"), kReasonQuota);
  EXPECT_EQ(reason(plan, "t1").details.at("requested").as_int64(), 9);
}

TEST_F(QuotaTest, AGpuTypeAbsentFromTheQuotaIsZero) {
  // A group that names no quota for a GPU type gets none of it.
  group("rg-b", "cpu:128", {"c1"});
  queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:1,cpu:1");
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "t1"), kReasonQuota);
  EXPECT_EQ(reason(plan, "t1").message, "quota: gpu/nvidia-a100-80gb 0 of 0 in use by rg-b, this task asks for 1");
}

TEST_F(QuotaTest, AnExplicitZeroIsZero) {
  // "cpu: 0" in the quota is a limit of 0, not "not limited".
  group("rg-b", "gpu/nvidia-a100-80gb:8,cpu:0", {"c1"});
  queue.task("t1", "rg-b", "cpu:1");
  EXPECT_EQ(reason_code(run(), "t1"), kReasonQuota);
}

TEST_F(QuotaTest, CpuAndMemoryAreNotLimitedWhenTheQuotaOmitsThem) {
  // A GPU-only quota leaves cpu and memory to the nodes.
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  for (int i = 1; i <= 4; ++i) {
    queue.task("t" + std::to_string(i), "rg-b", "cpu:60,memory:500Gi,gpu/nvidia-a100-80gb:1");
  }
  EXPECT_EQ(run().placements.size(), 4u);
}

TEST_F(QuotaTest, CpuIsLimitedWhenTheQuotaNamesIt) {
  // With cpu in the quota, cpu requests are counted against it.
  group("rg-b", "gpu/nvidia-a100-80gb:32,cpu:100", {"c1"});
  queue.task("t1", "rg-b", "cpu:60");
  queue.task("t2", "rg-b", "cpu:60");
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"t1"});
  EXPECT_EQ(reason(plan, "t2").message, "quota: cpu 60 of 100 in use by rg-b (pg-rg-b 60), this task asks for 60");
}

TEST(QuotaLimit, OnlyCpuAndMemoryAreUnlimitedByOmission) {
  // The ceiling rule in one place: named -> guaranteed; cpu/memory unnamed ->
  // unlimited; anything else unnamed -> 0.
  ResourceGroup g;
  g.quota["gpu/nvidia-a100-80gb"] = QuotaEntry{16, 24};
  EXPECT_EQ(quota_limit(g, "gpu/nvidia-a100-80gb"), 16);  // v1: no borrowing up to max
  EXPECT_EQ(quota_limit(g, "gpu/nvidia-h100-80gb"), 0);
  EXPECT_EQ(quota_limit(g, "cpu"), std::nullopt);
  EXPECT_EQ(quota_limit(g, "memory"), std::nullopt);
  EXPECT_EQ(quota_limit(g, "rdma/hca"), 0);
}

}  // namespace
}  // namespace cp::sched::testing
