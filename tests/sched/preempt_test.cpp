// Preemption: reclaim of borrowed capacity, priority after a wait, victim
// order, the smallest set, and what the preemptor does while victims stop.
#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
constexpr std::string_view kNode = "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8";
constexpr Millis kMinute = 60'000;

std::vector<std::string> victims(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.preemptions) out.push_back(p.task_id);
  return out;
}

class PreemptTest : public SchedTest {
 protected:
  void SetUp() override {
    fleet.priority_classes(/*urgent_after_s=*/600);
    fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label);
  }
  // With max_victims 2, the two cheapest candidates (priority 50) each hold
  // one GPU of n1 and n2, whose other seven GPUs no one may preempt: taking
  // both frees no node.
  void cheap_victims_on_n1_and_n2() {
    fleet.snapshot.config.max_victims = 2;
    for (std::string node : {"n1", "n2"}) {
      batch("cheap-" + node, node, "gpu/nvidia-a100-80gb:1", {0}).priority = 50;
      RunningWork& kept = batch("kept-" + node, node, "gpu/nvidia-a100-80gb:7", {1, 2, 3, 4, 5, 6, 7});
      kept.priority = 1000;
      kept.preemptible = false;
    }
  }
  // Batch work of rg-b filling one node.
  RunningWork& batch(const std::string& id, const std::string& node, std::string_view gpus = "gpu/nvidia-a100-80gb:8",
                     std::vector<int> indices = {0, 1, 2, 3, 4, 5, 6, 7}) {
    return fleet.running(id, "rg-b", "c1", gpus, {{0, node, std::move(indices)}});
  }
};

TEST_F(PreemptTest, AGroupReclaimsWhatItsCohortBorrowed) {
  // rg-b borrowed rg-a's idle 8 GPUs; rg-a now wants them back. Its task is
  // plain batch (may not preempt by priority): reclaim needs no priority.
  group("rg-a", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  fleet.borrow("rg-a", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", std::string(kA100), "16", "shared");
  batch("b1", "n1").started_at = kT0 - 10 * kMinute;
  batch("b2", "n2").started_at = kT0 - 5 * kMinute;
  queue.task("a1", "rg-a", "gpu/nvidia-a100-80gb:8").priority_class("batch", 100);
  Plan plan = run();
  ASSERT_EQ(plan.preemptions.size(), 1u) << describe(plan);
  const Preemption& p = plan.preemptions.front();
  EXPECT_EQ(p.kind, "reclaim");
  EXPECT_EQ(p.task_id, "b2");  // the later start loses less work
  EXPECT_EQ(p.preemptor, "a1");
  EXPECT_EQ(p.message, "preempted by a1 (batch 100): rg-a reclaims capacity that rg-b borrowed");
  EXPECT_FALSE(p.message_zh.empty());
  EXPECT_TRUE(plan.placements.empty());
  const PendingReason& r = reason(plan, "a1");
  EXPECT_EQ(r.code, kReasonPreemptionGrace);
  EXPECT_EQ(r.details.at("victims").as_array().size(), 1u);
}

TEST_F(PreemptTest, WorkWithinItsOwnGuaranteeIsNotReclaimed) {
  // rg-b holds only its guarantee: nothing is borrowed, nothing to reclaim.
  group("rg-a", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-b", "gpu/nvidia-a100-80gb:16", {"c1"});
  fleet.borrow("rg-a", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", std::string(kA100), "16", "shared");
  batch("b1", "n1");
  batch("b2", "n2");
  queue.task("a1", "rg-a", "gpu/nvidia-a100-80gb:8").priority_class("batch", 100);
  Plan plan = run();
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
  EXPECT_EQ(reason_code(plan, "a1"), kReasonNoNode);
}

TEST_F(PreemptTest, ReclaimTakesBackOnlyWhatTheTaskAsksFor) {
  // rg-b holds its GPUs within its guarantee but borrows cpu (4 of a
  // guarantee of 1): a task of rg-a that asks for no cpu has nothing to
  // take back; one that asks for cpu takes back work holding it.
  group("rg-a", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-b", "gpu/nvidia-a100-80gb:16,cpu:1", {"c1"});
  fleet.borrow("rg-a", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", std::string(kA100), "16", "shared");
  fleet.borrow("rg-b", "cpu", "8", "shared");
  batch("b1", "n1", "cpu:2,gpu/nvidia-a100-80gb:8").started_at = kT0 - 10 * kMinute;
  batch("b2", "n2", "cpu:2,gpu/nvidia-a100-80gb:8").started_at = kT0 - 5 * kMinute;
  queue.task("gpus-only", "rg-a", "gpu/nvidia-a100-80gb:8").priority_class("batch", 100);
  Plan plan = run();
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
  EXPECT_EQ(reason_code(plan, "gpus-only"), kReasonNoNode);

  queue.tasks.clear();
  queue.task("with-cpu", "rg-a", "cpu:1,gpu/nvidia-a100-80gb:8").priority_class("batch", 100);
  plan = run();
  EXPECT_EQ(victims(plan), std::vector<std::string>{"b2"}) << describe(plan);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions.front().kind, "reclaim");
}

TEST_F(PreemptTest, PriorityPreemptsOnlyAfterTheConfiguredWait) {
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("b1", "n1");
  batch("b2", "n2");
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000);

  Plan early = run(kT0 + 599'000);
  EXPECT_TRUE(early.preemptions.empty()) << describe(early);
  const Pending* p = pending_of(early, "u1");
  ASSERT_NE(p, nullptr);
  bool said_when = false;
  for (const auto& r : p->reasons) {
    if (r.code != "preemption_not_yet") continue;
    said_when = true;
    // Worded with the moment, so that it reads the same at every cycle.
    const std::string from = format_time(kT0 + 600'000);
    EXPECT_EQ(r.details.at("may_preempt_at").as_string(), from);
    EXPECT_EQ(r.message, "priority class urgent may preempt after 600s in the queue, from " + from);
    EXPECT_EQ(r.message_zh, "优先级 urgent 排队 600 秒后才可抢占，自 " + from + " 起");
  }
  EXPECT_TRUE(said_when) << describe(early);

  Plan on_time = run(kT0 + 600'000);
  ASSERT_EQ(on_time.preemptions.size(), 1u) << describe(on_time);
  EXPECT_EQ(on_time.preemptions.front().kind, "priority");
  EXPECT_EQ(reason_code(on_time, "u1"), kReasonPreemptionGrace);
}

TEST_F(PreemptTest, ClassesThatMayNotPreemptNeverDo) {
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("b1", "n1");
  batch("b2", "n2");
  queue.task("i1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("inference-high", 2000);
  Plan plan = run(kT0 + 3600'000);
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
}

TEST_F(PreemptTest, WorkThatIsNotPreemptibleIsNeverAVictim) {
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("i1", "n1");
  batch("i2", "n2");
  for (auto& w : fleet.snapshot.running) {
    w.priority = 2000;
    w.preemptible = false;
  }
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  queue.task("u2", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
  EXPECT_EQ(reason_code(plan, "u1"), kReasonNoNode);
}

TEST_F(PreemptTest, VictimsAreTheLowestPriorityThenCheckpointedThenLatestStarted) {
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  fleet.cluster("c1").node("n3", kNode, kA100Label).node("n4", kNode, kA100Label);
  RunningWork& low = batch("low", "n1");
  low.priority = 50;
  low.started_at = kT0 - 100 * kMinute;
  RunningWork& ckpt = batch("ckpt", "n2");
  ckpt.checkpoint = true;
  ckpt.started_at = kT0 - 90 * kMinute;
  batch("late", "n3").started_at = kT0 - 1 * kMinute;
  batch("early", "n4").started_at = kT0 - 80 * kMinute;
  Millis long_ago = kT0 - 3600'000;
  for (const char* id : {"u1", "u2", "u3", "u4"}) {
    queue.task(id, "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(long_ago);
  }
  Plan plan = run();
  EXPECT_EQ(victims(plan), (std::vector<std::string>{"low", "ckpt", "late", "early"})) << describe(plan);
  // Each preemptor got its own victim: none was chosen twice.
  EXPECT_EQ(plan.preemptions[0].preemptor, "u1");
  EXPECT_EQ(plan.preemptions[3].preemptor, "u4");
}

TEST_F(PreemptTest, TheSmallestSetIsChosenAndUnneededVictimsAreDropped) {
  // Cheapest first is "small" (4 GPUs on n1, latest start), but freeing it
  // does not make room for 8 on one node; "big" does, and then "small" was
  // not needed after all.
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("small", "n1", "gpu/nvidia-a100-80gb:4", {0, 1, 2, 3}).started_at = kT0 - 1 * kMinute;
  batch("other", "n1", "gpu/nvidia-a100-80gb:4", {4, 5, 6, 7}).started_at = kT0 - 50 * kMinute;
  batch("big", "n2").started_at = kT0 - 2 * kMinute;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_EQ(victims(plan), std::vector<std::string>{"big"}) << describe(plan);
}

TEST_F(PreemptTest, CheapVictimsSpreadOverNodesGiveWayToASetOnOneNode) {
  // The cheap victims reach max_victims and free no node; "mid" (priority
  // 100) alone frees n3.
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  fleet.cluster("c1").node("n3", kNode, kA100Label);
  cheap_victims_on_n1_and_n2();
  batch("mid", "n3").priority = 100;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_EQ(victims(plan), std::vector<std::string>{"mid"}) << describe(plan);
  EXPECT_EQ(reason(plan, "u1").code, kReasonPreemptionGrace) << describe(plan);
}

TEST_F(PreemptTest, AGangWhoseCheapVictimsAreSpreadTakesNodesWhoseSetsFreeThem) {
  // As above for a gang of two replicas of 8 GPUs: "mid-n3" and "mid-n4"
  // free one node each; the cheap victims of n1 and n2 free none.
  group("rg-b", "gpu/nvidia-a100-80gb:48", {"c1"});
  fleet.cluster("c1").node("n3", kNode, kA100Label).node("n4", kNode, kA100Label);
  cheap_victims_on_n1_and_n2();
  batch("mid-n3", "n3").priority = 100;
  batch("mid-n4", "n4").priority = 100;
  queue.task("g1", "rg-b", "gpu/nvidia-a100-80gb:8", 2).priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  std::vector<std::string> got = victims(plan);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"mid-n3", "mid-n4"})) << describe(plan);
  EXPECT_EQ(reason(plan, "g1").code, kReasonPreemptionGrace) << describe(plan);
}

TEST_F(PreemptTest, AVictimNeededForQuotaIsKeptThoughItRunsOffTheChosenNode) {
  // rg-b is at its cpu quota of 32 with two cpu-only batch tasks on n1, whose
  // GPUs rg-c's inference work holds; u1 (4 GPUs, 16 cpu) can only go to n2.
  // One victim gives back the cpu it needs, and stays in the set even though
  // it runs on another node than u1's: the drop pass asks quota too.
  group("rg-b", "cpu:32,gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-c", "gpu/nvidia-a100-80gb:8", {"c1"});
  RunningWork& held = fleet.running("held", "rg-c", "c1", "gpu/nvidia-a100-80gb:8", {{0, "n1", {0, 1, 2, 3, 4, 5, 6, 7}}});
  held.priority = 1000;
  held.preemptible = false;
  fleet.running("v-late", "rg-b", "c1", "cpu:16", {{0, "n1", {}}}).started_at = kT0 - 1 * kMinute;
  fleet.running("v-early", "rg-b", "c1", "cpu:16", {{0, "n1", {}}}).started_at = kT0 - 50 * kMinute;
  queue.task("u1", "rg-b", "cpu:16,gpu/nvidia-a100-80gb:4").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_EQ(victims(plan), std::vector<std::string>{"v-late"}) << describe(plan);
  ASSERT_EQ(plan.preemptions.size(), 1u) << describe(plan);
  const PendingReason& r = reason(plan, "u1");
  EXPECT_EQ(r.code, kReasonPreemptionGrace) << describe(plan);
}

TEST_F(PreemptTest, ALowerPriorityIsNeverPreemptedForAnEqualOne) {
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("b1", "n1").priority = 1000;
  batch("b2", "n2").priority = 1000;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
}

TEST_F(PreemptTest, WhileVictimsStopTheRoomIsHeldAndNotPreemptedAgain) {
  // Next cycle: the victim is stopping (its grace). The preemptor waits for it
  // and picks no new victim; a batch task cannot take the room either.
  group("rg-b", "gpu/nvidia-a100-80gb:32", {"c1"});
  batch("b1", "n1").stopping = true;
  batch("b2", "n2");
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  queue.task("small", "rg-b", "gpu/nvidia-a100-80gb:1").priority_class("batch", 100);
  Plan plan = run();
  EXPECT_TRUE(plan.preemptions.empty()) << describe(plan);
  const PendingReason& r = reason(plan, "u1");
  EXPECT_EQ(r.code, kReasonPreemptionGrace);
  EXPECT_TRUE(r.details.at("already_stopping").as_bool());
  EXPECT_EQ(r.message, "waiting for 1 stopping task to checkpoint and exit: b1");
  EXPECT_EQ(reason_code(plan, "small"), kReasonNoNode);
}

TEST_F(PreemptTest, QuotaShortPreemptsOnlyWorkThatGivesQuotaBack) {
  // rg-b is at its quota of 8. Lower-priority work of rg-c on n2 would free
  // nodes but not rg-b's quota; rg-b's own batch work on n1 does both.
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-c", "gpu/nvidia-a100-80gb:8", {"c1"});
  batch("own", "n1").started_at = kT0 - 50 * kMinute;
  RunningWork& other = fleet.running("other", "rg-c", "c1", "gpu/nvidia-a100-80gb:8", {{0, "n2", {0, 1, 2, 3, 4, 5, 6, 7}}});
  other.priority = 10;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  Plan plan = run();
  EXPECT_EQ(victims(plan), std::vector<std::string>{"own"}) << describe(plan);
}

TEST_F(PreemptTest, QuotaShortPreemptsNothingWhenAllItCouldTakeIsNotEnough) {
  // rg-b is at its quota of 8: 4 GPUs of batch work, 4 of inference work
  // that may not be preempted. u1 asks for 8: even with the batch work gone
  // rg-b would hold 12, so nothing is preempted, and the quota book is left
  // as it was: t2's 4 GPUs are still refused on quota, not behind u1.
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  batch("own", "n1", "gpu/nvidia-a100-80gb:4", {0, 1, 2, 3});
  RunningWork& kept = batch("kept", "n1", "gpu/nvidia-a100-80gb:4", {4, 5, 6, 7});
  kept.preemptible = false;
  kept.priority = 1000;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("urgent", 1000).queued_at(kT0 - 3600'000);
  queue.task("t2", "rg-b", "gpu/nvidia-a100-80gb:4").queued_at(kT0 - 60'000);
  Plan plan = run();
  EXPECT_TRUE(victims(plan).empty()) << describe(plan);
  EXPECT_EQ(reason_code(plan, "u1"), kReasonQuota) << describe(plan);
  EXPECT_EQ(reason_code(plan, "t2"), kReasonQuota) << describe(plan);
}

TEST_F(PreemptTest, QuotaShortWaitsOnlyForStoppingWorkThatGivesQuotaBack) {
  // rg-b is at its quota of 8 and u1 may not preempt (batch). Work of rg-c
  // stopping on n2 frees a node but none of rg-b's quota: u1 still waits on
  // quota. Once rg-b's own work on n1 is stopping too, u1 waits for that.
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-c", "gpu/nvidia-a100-80gb:8", {"c1"});
  batch("own", "n1");
  fleet.running("other", "rg-c", "c1", "gpu/nvidia-a100-80gb:8", {{0, "n2", {0, 1, 2, 3, 4, 5, 6, 7}}}).stopping = true;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:8").priority_class("batch", 100);
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "u1"), kReasonQuota) << describe(plan);

  fleet.snapshot.running.front().stopping = true;  // own
  plan = run();
  const PendingReason& r = reason(plan, "u1");
  EXPECT_EQ(r.code, kReasonPreemptionGrace) << describe(plan);
  EXPECT_EQ(r.message, "waiting for 1 stopping task to checkpoint and exit: own");
}

TEST_F(PreemptTest, QuotaShortCountsStoppingWorkOfItsCohortOnlyWhereItCouldRun) {
  // rg-b and rg-c share a cohort: 16 GPUs guaranteed between them, 16 in
  // use (rg-b 8, rg-c 4 on n2 and 4 on m1), so rg-b's 4 more are refused.
  // rg-c's work stopping on m1 (cluster c2, which rg-b does not use) is not
  // waited for; the same work stopping on n2 is, and gives the cohort room.
  fleet.cluster("c2").node("m1", kNode, kA100Label);
  group("rg-b", "gpu/nvidia-a100-80gb:8", {"c1"});
  group("rg-c", "gpu/nvidia-a100-80gb:8", {"c1", "c2"});
  fleet.borrow("rg-b", std::string(kA100), "16", "shared");
  fleet.borrow("rg-c", std::string(kA100), "16", "shared");
  batch("own", "n1");
  fleet.running("near", "rg-c", "c1", "gpu/nvidia-a100-80gb:4", {{0, "n2", {0, 1, 2, 3}}});
  fleet.running("far", "rg-c", "c2", "gpu/nvidia-a100-80gb:4", {{0, "m1", {0, 1, 2, 3}}}).stopping = true;
  queue.task("u1", "rg-b", "gpu/nvidia-a100-80gb:4").priority_class("batch", 100);
  Plan plan = run();
  EXPECT_EQ(reason_code(plan, "u1"), kReasonQuota) << describe(plan);

  fleet.snapshot.running[2].stopping = false;  // far runs on
  fleet.snapshot.running[1].stopping = true;   // near stops
  plan = run();
  const PendingReason& r = reason(plan, "u1");
  EXPECT_EQ(r.code, kReasonPreemptionGrace) << describe(plan);
  EXPECT_EQ(r.message, "waiting for 1 stopping task to checkpoint and exit: near");
}

}  // namespace
}  // namespace cp::sched::testing
