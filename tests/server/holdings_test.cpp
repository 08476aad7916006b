// The apply-time re-check (server/holdings.h): a plan made on an older
// snapshot is checked against what the store holds inside the applying
// transaction: GPUs already taken, nodes gone, quota used up meanwhile. Only
// the nodes of the plan's placements are read and charged.
#include "control_plane_fixture.h"
#include "server/holdings.h"

namespace cp::testing {
namespace {

class HoldingsTest : public ControlPlaneTest {
 protected:
  // A 2-GPU task running on c1-n1 (8 GPUs); returns its start order.
  StartOrder running_two_gpus() {
    agent_ = connect("c1").first;
    sync(agent_, {});
    auto ids = submit(alice_, pipeline_yaml("pa", 2));
    EXPECT_EQ(ids.size(), 1u);
    EXPECT_TRUE(cp_->schedule_once().ok());
    auto start = sync(agent_, {}).start;
    EXPECT_EQ(start.size(), 1u);
    return start.empty() ? StartOrder{} : start[0];
  }

  static sched::Placement on(const std::string& node, std::vector<int> gpus) {
    sched::Placement pl;
    pl.task_id = "t-new";
    pl.cluster_id = "c1";
    pl.per_replica = Resources::parse_or_die("cpu:1,gpu/a100:" + std::to_string(gpus.size()));
    pl.placements = {ReplicaPlacement{0, node, std::move(gpus)}};
    return pl;
  }

  static Task queued_task() {
    Task t;
    t.id = "t-new";
    t.resource_group = "rg-a";
    t.priority_class = "batch";
    t.state = TaskState::Queued;
    return t;
  }

  Principal agent_;
};

TEST_F(HoldingsTest, RefusesGpusTakenAndNodesGoneAndChargesWhatItAccepts) {
  StartOrder running = running_two_gpus();
  ASSERT_EQ(running.placements.size(), 1u);
  const auto taken = running.placements[0].gpu_indices;
  ASSERT_EQ(taken.size(), 2u);
  std::vector<int> free;
  for (int i = 0; i < 8 && free.size() < 2; ++i) {
    if (std::find(taken.begin(), taken.end(), i) == taken.end()) free.push_back(i);
  }
  const sched::Placement on_taken = on("c1-n1", {taken[0]});
  const sched::Placement on_free = on("c1-n1", free);
  const sched::Placement on_missing = on("c1-n9", {0});
  const Task t = queued_task();

  std::optional<std::string> taken_why, free_why, missing_why, after_charge_why;
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
                      LiveWork live;
                      CP_TRY(live.refresh(tx, nullptr, 0, clock_.now_ms()));
                      CP_ASSIGN(auto held, internal::Holdings::load(tx, live, {on_taken, on_free, on_missing}));
                      taken_why = held->recheck(t, on_taken);
                      free_why = held->recheck(t, on_free);
                      missing_why = held->recheck(t, on_missing);
                      // Accepted: charged at once, so the next placement of the plan sees it.
                      Attempt a;
                      a.cluster_id = "c1";
                      a.resources = on_free.per_replica;
                      a.placements = on_free.placements;
                      held->charge(a, t.resource_group);
                      after_charge_why = held->recheck(t, on_free);
                      return {};
                    })
                  .ok());
  ASSERT_TRUE(taken_why.has_value());
  EXPECT_EQ(*taken_why, "GPU " + std::to_string(taken[0]) + " on c1-n1 was taken");
  EXPECT_FALSE(free_why.has_value()) << *free_why;
  ASSERT_TRUE(missing_why.has_value());
  EXPECT_EQ(*missing_why, "node c1/c1-n9 is gone");
  ASSERT_TRUE(after_charge_why.has_value());
  // rg-a guarantees 4 GPUs: 2 running and 2 charged leave none for another 2.
  EXPECT_NE(after_charge_why->find("quota changed since the snapshot"), std::string::npos) << *after_charge_why;
}

TEST_F(HoldingsTest, ANodeOutsideThePlanIsNotRead) {
  // Only the plan's nodes are loaded: recheck() of a placement on any other
  // node (here the running task's own node) says it is gone, even though it exists.
  running_two_gpus();
  const sched::Placement on_n1 = on("c1-n1", {7});
  const Task t = queued_task();
  std::optional<std::string> why;
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
                      LiveWork live;
                      CP_TRY(live.refresh(tx, nullptr, 0, clock_.now_ms()));
                      CP_ASSIGN(auto held, internal::Holdings::load(tx, live, {}));
                      why = held->recheck(t, on_n1);
                      return {};
                    })
                  .ok());
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "node c1/c1-n1 is gone");
}

}  // namespace
}  // namespace cp::testing
