// No head-of-line blocking, and no starvation: the first blocked task of a
// group reserves what it waits for; smaller tasks backfill only elsewhere.
#include <deque>

#include "harness.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
constexpr std::string_view kNode = "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8";

class ReservationTest : public SchedTest {
 protected:
  void SetUp() override { group("rg-b", "gpu/nvidia-a100-80gb:64", {"c1"}); }
};

TEST_F(ReservationTest, SmallTasksBackfillOnlyWhereTheyDoNotDelayABlockedGang) {
  // The gang needs both of n1 and n2 whole; 2 GPUs are busy on n1. A 1-GPU
  // task behind it goes to n3, not to n2, and a second one waits.
  fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label).node("n3", "cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:1", kA100Label);
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n1", {0, 1}}});
  queue.task("gang", "rg-b", "gpu/nvidia-a100-80gb:8", 2).queued_at(kT0);
  queue.task("s1", "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(kT0 + 1);
  queue.task("s2", "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(kT0 + 2);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"s1"}) << describe(plan);
  EXPECT_EQ(nodes_of(plan, "s1"), std::vector<std::string>{"n3"});
  const Pending* gang = pending_of(plan, "gang");
  ASSERT_NE(gang, nullptr);
  EXPECT_EQ(gang->reasons.back().code, "reserved");
  EXPECT_EQ(gang->reasons.back().message,
            "first in line: room is held for it on c1/n1, c1/n2 until running work there ends");
  const PendingReason& r = reason(plan, "s2");
  EXPECT_EQ(r.code, kReasonReservation);
  EXPECT_EQ(r.message, "would fit, but the room is held for earlier waiting task gang so they are not starved");
  EXPECT_FALSE(r.message_zh.empty());
}

TEST_F(ReservationTest, WithoutReservationsSmallTasksGoFirst) {
  // The same fleet with reservations off: best-effort backfill, the small
  // task takes n2 (this is what starves gangs; see the next test).
  fleet.snapshot.config.reservations_per_group = 0;
  fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label);
  fleet.running("r1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "n1", {0, 1}}});
  queue.task("gang", "rg-b", "gpu/nvidia-a100-80gb:8", 2).queued_at(kT0);
  queue.task("s1", "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(kT0 + 1);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"s1"});
}

TEST_F(ReservationTest, ATaskThatCanNeverFitReservesNothing) {
  // 3 replicas of 8 GPUs on a 2-node cluster: waiting does not help; holding
  // room for it would only idle the fleet.
  fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label);
  queue.task("huge", "rg-b", "gpu/nvidia-a100-80gb:8", 3).queued_at(kT0);
  queue.task("s1", "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(kT0 + 1);
  Plan plan = run();
  EXPECT_EQ(placed(plan), std::vector<std::string>{"s1"});
  for (const auto& r : pending_of(plan, "huge")->reasons) EXPECT_NE(r.code, "reserved");
}

TEST_F(ReservationTest, QuotaIsHeldForTheFirstBlockedTaskOfAGroup) {
  // rg-q has 8 GPUs of quota, 6 in use. The 4-GPU task waits for quota; the
  // 1-GPU task behind it would fit the quota but must not take it.
  fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label);
  group("rg-q", "gpu/nvidia-a100-80gb:8", {"c1"});
  fleet.running("r1", "rg-q", "c1", "gpu/nvidia-a100-80gb:6", {{0, "n1", {0, 1, 2, 3, 4, 5}}});
  queue.task("big", "rg-q", "gpu/nvidia-a100-80gb:4").queued_at(kT0);
  queue.task("small", "rg-q", "gpu/nvidia-a100-80gb:1").queued_at(kT0 + 1);
  Plan plan = run();
  EXPECT_TRUE(plan.placements.empty()) << describe(plan);
  EXPECT_EQ(reason_code(plan, "big"), kReasonQuota);
  EXPECT_EQ(pending_of(plan, "big")->reasons.back().code, "reserved");
  EXPECT_EQ(reason_code(plan, "small"), kReasonReservation);
}

// A stream of 1-GPU tasks, each running three cycles, keeps a 2-node fleet
// busy; a 2x8 gang queued first must still start within a few cycles. Each
// cycle: finished work leaves, new small tasks arrive, decide(), placements
// start. With reservations off, the same stream starves the gang.
int cycles_until_gang_starts(int reservations) {
  Fleet fleet;
  fleet.cluster("c1").node("n1", kNode, kA100Label).node("n2", kNode, kA100Label);
  fleet.group("rg-b", "gpu/nvidia-a100-80gb:64", {"c1"});
  fleet.snapshot.config.reservations_per_group = reservations;
  // Start from a busy fleet: 1-GPU tasks that end at staggered cycles.
  std::deque<std::pair<int, RunningWork>> running;  // (end cycle, work)
  int next_id = 0;
  for (int node = 1; node <= 2; ++node) {
    for (int g = 0; g < 8; ++g) {
      RunningWork w;
      w.task_id = "warm" + std::to_string(next_id++);
      w.attempt_id = w.task_id + ".1";
      w.resource_group = "rg-b";
      w.cluster_id = "c1";
      w.per_replica = res("gpu/nvidia-a100-80gb:1");
      w.placements = {{0, "n" + std::to_string(node), {g}}};
      running.emplace_back(g % 3, std::move(w));
    }
  }
  Queue queue;
  queue.task("gang", "rg-b", "gpu/nvidia-a100-80gb:8", 2).queued_at(kT0);
  for (int cycle = 0; cycle < 40; ++cycle) {
    Millis now = kT0 + cycle * 1000;
    std::erase_if(running, [&](const auto& r) { return r.first <= cycle; });
    for (int i = 0; i < 6; ++i) {
      queue.task("s" + std::to_string(next_id++), "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(now);
    }
    fleet.snapshot.running.clear();
    for (const auto& [end, w] : running) fleet.snapshot.running.push_back(w);
    Plan plan = decide(fleet.snapshot, queue.tasks, now);
    for (const auto& p : plan.placements) {
      if (p.task_id == "gang") return cycle;
      RunningWork w;
      w.task_id = p.task_id;
      w.attempt_id = p.task_id + ".1";
      w.resource_group = "rg-b";
      w.cluster_id = p.cluster_id;
      w.per_replica = p.per_replica;
      w.placements = p.placements;
      running.emplace_back(cycle + 3, std::move(w));
      std::erase_if(queue.tasks, [&](const QueuedTask& q) { return q.task.id == p.task_id; });
    }
  }
  return -1;
}

TEST(NoStarvation, ALargeGangStartsUnderAStreamOfSmallTasks) {
  int with = cycles_until_gang_starts(1);
  EXPECT_GE(with, 0) << "the gang never started";
  EXPECT_LE(with, 4);
  // The same stream without reservations: the gang never gets two whole nodes.
  EXPECT_EQ(cycles_until_gang_starts(0), -1);
}

}  // namespace
}  // namespace cp::sched::testing
