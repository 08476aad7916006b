// Reasons kept as figures: each tells its code without being worded, and
// that code is the one its words carry (the server compares codes so, to
// tell a new why from new counts).
#include "sched/reasons.h"

#include <gtest/gtest.h>

#include "sched/feasible.h"
#include "sched/request.h"

namespace cp::sched {
namespace {

void expect_code(const Reasons::Shared& r, std::string_view code) {
  EXPECT_EQ(r->code(), code);
  EXPECT_EQ(r->worded().code, code) << r->worded().message;
}

Task gang_of(int replicas) {
  Task t;
  t.id = "t1";
  t.queued_at = 1'000'000;
  t.step.resources = Resources::parse_or_die("cpu:8,gpu/nvidia-a100-80gb:8");
  t.step.replicas = replicas;
  t.step.fallbacks.push_back(StepShape{600, Resources::parse_or_die("cpu:8,gpu/nvidia-l40s:8")});
  return t;
}

TEST(ReasonsTest, AReasonKeptAsFiguresTellsTheCodeOfItsWords) {
  reasons::QuotaFigures quota;
  quota.resource_group = "rg";
  quota.resource = "gpu/nvidia-a100-80gb";
  quota.used = quota.guaranteed = quota.limit = 8;
  quota.requested = 2;
  expect_code(reasons::quota_refusal(quota), kReasonQuota);

  ResourceGroup group;
  group.name = "rg";
  const Request gang = request_of(gang_of(2)).value();
  NodeCounts counts;
  counts.total = 3;
  counts[NodeMisfit::kInsufficientGpu] = 3;
  expect_code(reasons::no_node(counts, gang, group, {"c1"}), kReasonNoNode);
  // Some nodes take a replica, no cluster the whole gang.
  counts[NodeMisfit::kInsufficientGpu] = 1;
  counts.fit = 2;
  expect_code(reasons::no_node(counts, gang, group, {"c1"}), kReasonGang);
  const Request one = request_of(gang_of(1)).value();
  expect_code(reasons::no_node(counts, one, group, {"c1"}), kReasonNoNode);

  expect_code(reasons::preemption_grace({{"a1", "t9", "priority"}}, false), kReasonPreemptionGrace);
  expect_code(reasons::reservation({"t0"}), kReasonReservation);
  expect_code(reasons::preempt_later("urgent", 600, 1'000'000), kReasonPreemptLater);
  expect_code(reasons::fallbacks(gang_of(1), 0), kReasonFallback);
}

}  // namespace
}  // namespace cp::sched
