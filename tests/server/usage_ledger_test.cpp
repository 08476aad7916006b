// The usage ledger's arithmetic (internal::usage_of), on hand-computed cases.
#include <gtest/gtest.h>

#include "server/internal.h"

namespace cp {
namespace {

constexpr Millis kHour = 3'600'000;
constexpr Millis kFeb1 = 1'769'904'000'000;  // 2026-02-01T00:00:00Z

Task team_task() {
  Task t;
  t.id = "t1";
  t.project_group = "vision";
  t.resource_group = "rg-a";
  t.user = "alice";
  return t;
}

Attempt attempt(Millis start, Millis end, AttemptState state = AttemptState::Succeeded) {
  Attempt a;
  a.id = "t1.1";
  a.task_id = "t1";
  a.cluster_id = "c1";
  a.placements = {ReplicaPlacement{0, "n1", {0}}, ReplicaPlacement{1, "n2", {0}}};
  a.resources = Resources::parse_or_die("cpu:500m,memory:1536Mi,gpu/nvidia-a100-80gb:1");
  a.state = state;
  a.started_at = start;
  a.finished_at = end;
  return a;
}

TEST(UsageLedger, AnAttemptOverMidnightAtTheEndOfAMonthIsSplitExactly) {
  // 2 replicas x (1 GPU, 0.5 CPU, 1.5 GiB) from Jan 31 22:00 to Feb 1 01:30:00.250.
  auto rows = internal::usage_of(team_task(), attempt(kFeb1 - 2 * kHour, kFeb1 + 3 * kHour / 2 + 250));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].day, kFeb1 - 24 * kHour);
  EXPECT_EQ(rows[0].gpu_ms, 2 * 2 * kHour);         // 4 GPU-hours
  EXPECT_EQ(rows[0].cpu_core_ms, 1 * 2 * kHour);    // 1 core for 2 h
  EXPECT_EQ(rows[0].memory_mib_s, 3072 * 7200);     // 3 GiB for 7,200 s
  EXPECT_EQ(rows[0].attempts, 1);
  EXPECT_EQ(rows[1].day, kFeb1);
  EXPECT_EQ(rows[1].gpu_ms, 2 * (3 * kHour / 2 + 250));
  EXPECT_EQ(rows[1].cpu_core_ms, 3 * kHour / 2 + 250);
  EXPECT_EQ(rows[1].memory_mib_s, 3072 * 5400 + 768);  // 0.25 s of 3,072 MiB
  EXPECT_EQ(rows[1].attempts, 0);
  for (const auto& r : rows) {
    EXPECT_EQ(r.project_group, "vision");
    EXPECT_EQ(r.resource_group, "rg-a");
    EXPECT_EQ(r.cluster, "c1");
    EXPECT_EQ(r.user, "alice");
    EXPECT_EQ(r.gpu_type, "nvidia-a100-80gb");
    EXPECT_EQ(r.outcome, "Succeeded");
  }
}

TEST(UsageLedger, AttemptsThatNeverRanAddNothingAndPreemptedOnesAreMarked) {
  EXPECT_TRUE(internal::usage_of(team_task(), attempt(0, kFeb1, AttemptState::Cancelled)).empty());
  EXPECT_TRUE(internal::usage_of(team_task(), attempt(kFeb1, kFeb1)).empty());
  auto rows = internal::usage_of(team_task(), attempt(kFeb1, kFeb1 + 1000, AttemptState::Preempted));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outcome, "Preempted");
  EXPECT_EQ(rows[0].gpu_ms, 2000);
}

TEST(UsageLedger, DayStartIsUtcMidnightAlsoBeforeTheEpoch) {
  EXPECT_EQ(internal::day_start(kFeb1 + 5), kFeb1);
  EXPECT_EQ(internal::day_start(kFeb1 - 1), kFeb1 - 24 * kHour);
  EXPECT_EQ(internal::day_start(-1), -24 * kHour);
}

}  // namespace
}  // namespace cp
