#include "server/warm_schedule.h"

#include <gtest/gtest.h>

#include "store/store.h"

namespace cp {
namespace {

Task task(const std::string& id, TaskState state, const std::string& priority_class = "batch") {
  Task t;
  t.id = id;
  t.pipeline_id = "p-1";
  t.name = id;
  t.project_group = "pa";
  t.resource_group = "rg-a";
  t.user = "alice";
  t.priority_class = priority_class;
  t.priority = 100;
  t.state = state;
  t.created_at = t.updated_at = 1000;
  t.step.resources = Resources::parse_or_die("cpu:1,gpu/a100:1");
  return t;
}

Attempt attempt(const std::string& task_id, AttemptState state, const std::string& node = "n1") {
  Attempt a;
  a.id = task_id + ".1";
  a.task_id = task_id;
  a.number = 1;
  a.epoch = 1;
  a.cluster_id = "c1";
  a.state = state;
  a.resources = Resources::parse_or_die("cpu:1,gpu/a100:1");
  a.placements = {ReplicaPlacement{0, node, {0}}};
  return a;
}

Node node(const std::string& name, int gpus = 4) {
  Node n;
  n.cluster_id = "c1";
  n.name = name;
  n.capacity = Resources::parse_or_die("cpu:32,memory:128Gi,gpu/a100:" + std::to_string(gpus));
  n.allocatable = n.capacity;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(GpuDevice{i, "GPU-" + std::to_string(i), "a100", 80, 0, 0});
  return n;
}

// The fleet as a cycle reads it: one online cluster, one group, two classes.
sched::Snapshot meta(std::vector<Node> nodes) {
  sched::Snapshot s;
  Cluster c;
  c.id = "c1";
  c.state = ClusterState::online;
  c.state_reason.clear();
  s.clusters.push_back(c);
  ResourceGroup rg;
  rg.name = "rg-a";
  rg.clusters = {"c1"};
  s.resource_groups.push_back(rg);
  PriorityClass batch;
  batch.name = "batch";
  batch.value = 100;
  PriorityClass high;
  high.name = "inference-high";
  high.value = 1000;
  high.preemptible = false;
  s.priority_classes = {batch, high};
  s.nodes = std::move(nodes);
  return s;
}

class WarmScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    write([&](Tx& tx) -> Status { return tx.insert_cluster(meta_.clusters.front()); });
  }
  void write(const std::function<Status(Tx&)>& body) { ASSERT_TRUE(store_->write(body).ok()); }
  // The nodes of c1 in the store become `nodes`, as an agent sync writes them.
  void write_nodes(const std::vector<Node>& nodes) {
    write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto old, tx.list_nodes("c1"));
      for (const auto& n : old) CP_TRY(tx.delete_node("c1", n.name));
      for (const auto& n : nodes) CP_TRY(tx.upsert_node(n));
      return {};
    });
    fleet_.changed("c1");
  }
  // A cycle's first half: the live work and nodes brought up to date, the
  // kept state synced, and then checked against them.
  void cycle(const sched::Snapshot& m, Millis now = 10'000) {
    const auto mark = LiveWork::mark(*store_);
    const auto node_marks = fleet_.marks();
    ASSERT_TRUE(store_->read([&](Tx& tx) -> Status {
                        CP_TRY(live_.refresh(tx, store_->changes(), mark, now));
                        return nodes_.refresh(tx, node_marks, m.clusters, now);
                      }).ok());
    warm_.sync(m, nodes_, live_);
    sched::Snapshot read = m;
    read.nodes = nodes_.all();
    EXPECT_EQ(warm_.differences(read, live_), "");
  }
  const sched::RunningWork* kept(const std::string& attempt_id) {
    snapshot_ = warm_.sync(meta_, nodes_, live_).snapshot();
    for (const auto& w : snapshot_.running) {
      if (w.attempt_id == attempt_id) return &w;
    }
    return nullptr;
  }

  std::unique_ptr<Store> store_;
  FleetNodes fleet_;
  SchedulerNodes nodes_;
  LiveWork live_;
  WarmSchedule warm_;
  sched::Snapshot meta_ = meta({});
  sched::Snapshot snapshot_;
};

TEST_F(WarmScheduleTest, BuildsOnceThenFollowsAttemptsAsDeltas) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-a", TaskState::Dispatched)));
    return tx.insert_attempt(attempt("t-a", AttemptState::Dispatched));
  });
  cycle(meta_);
  EXPECT_EQ(warm_.stats().builds, 1);
  ASSERT_NE(kept("t-a.1"), nullptr);

  // A new attempt, then the first one ends: two deltas, no build.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-b", TaskState::Running)));
    return tx.insert_attempt(attempt("t-b", AttemptState::Running, "n2"));
  });
  cycle(meta_);
  write([](Tx& tx) -> Status {
    Attempt a = attempt("t-a", AttemptState::Succeeded);
    CP_TRY(tx.update_attempt(a));
    return tx.update_task(task("t-a", TaskState::Succeeded));
  });
  cycle(meta_);
  EXPECT_EQ(warm_.stats().builds, 1);
  EXPECT_EQ(warm_.stats().work_deltas, 2);
  EXPECT_EQ(kept("t-a.1"), nullptr);
  ASSERT_NE(kept("t-b.1"), nullptr);
  EXPECT_EQ(kept("t-b.1")->placements.front().node, "n2");
}

TEST_F(WarmScheduleTest, AChangeToTheTaskAloneReachesItsWork) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-a", TaskState::Running)));
    return tx.insert_attempt(attempt("t-a", AttemptState::Running));
  });
  cycle(meta_);
  ASSERT_NE(kept("t-a.1"), nullptr);
  EXPECT_FALSE(kept("t-a.1")->stopping);
  // Cancelled: only the task row changes; its work is told to stop.
  write([](Tx& tx) -> Status {
    Task t = task("t-a", TaskState::Running);
    t.cancel_requested = true;
    return tx.update_task(t);
  });
  cycle(meta_);
  ASSERT_NE(kept("t-a.1"), nullptr);
  EXPECT_TRUE(kept("t-a.1")->stopping);
  EXPECT_EQ(warm_.stats().builds, 1);
}

TEST_F(WarmScheduleTest, NodesChangeAloneAndWhatTheSchedulerDoesNotReadChangesNothing) {
  std::vector<Node> nodes = {node("n1"), node("n2")};
  write_nodes(nodes);
  cycle(meta_);
  EXPECT_EQ(warm_.stats().builds, 1);
  EXPECT_EQ(warm_.sync(meta_, nodes_, live_).snapshot().nodes.size(), 2u);
  // Measured use and times change at every agent sync: not a delta.
  nodes[0].gpus[0].utilization = 97;
  nodes[0].gpus[0].memory_used = 40;
  nodes[0].updated_at = 123;
  write_nodes(nodes);
  sched::Snapshot m = meta_;
  m.clusters[0].last_contact = 456;
  cycle(m);
  EXPECT_EQ(warm_.stats().node_deltas, 0);
  EXPECT_EQ(warm_.stats().builds, 1);
  // Maintenance on n1, n2 gone, n3 new: three deltas, no build.
  nodes[0].maintenance = true;
  nodes[1] = node("n3");
  write_nodes(nodes);
  cycle(m);
  EXPECT_EQ(warm_.stats().node_deltas, 3);
  EXPECT_EQ(warm_.stats().builds, 1);
  const auto s = warm_.sync(m, nodes_, live_).snapshot();
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_TRUE(s.nodes[0].maintenance);
}

TEST_F(WarmScheduleTest, NodesAreReadAgainOnlyAfterAWriteSaysSo) {
  write_nodes({node("n1")});
  cycle(meta_);
  // Written behind the cache's back (no FleetNodes::changed): not seen...
  write([](Tx& tx) -> Status { return tx.upsert_node(node("n2")); });
  cycle(meta_, 20'000);
  EXPECT_EQ(nodes_.all().size(), 1u);
  // ...until the periodic full read.
  cycle(meta_, 20'000 + SchedulerNodes::kFullReadEveryMs);
  EXPECT_EQ(nodes_.all().size(), 2u);
  EXPECT_EQ(warm_.sync(meta_, nodes_, live_).snapshot().nodes.size(), 2u);
}

TEST_F(WarmScheduleTest, AChangedPriorityClassBuildsEverythingAgain) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-a", TaskState::Running)));
    return tx.insert_attempt(attempt("t-a", AttemptState::Running));
  });
  cycle(meta_);
  ASSERT_NE(kept("t-a.1"), nullptr);
  EXPECT_TRUE(kept("t-a.1")->preemptible);
  // batch becomes not preemptible: no row changed, yet every batch work must follow.
  meta_.priority_classes[0].preemptible = false;
  cycle(meta_);
  EXPECT_EQ(warm_.stats().builds, 2);
  ASSERT_NE(kept("t-a.1"), nullptr);
  EXPECT_FALSE(kept("t-a.1")->preemptible);
}

TEST_F(WarmScheduleTest, DifferencesNameWhatTheKeptStateMissed) {
  write_nodes({node("n1"), node("n2")});
  cycle(meta_);
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-a", TaskState::Running)));
    return tx.insert_attempt(attempt("t-a", AttemptState::Running));
  });
  // The live work read the new rows, the kept state did not sync yet.
  const auto mark = LiveWork::mark(*store_);
  ASSERT_TRUE(store_->read([&](Tx& tx) { return live_.refresh(tx, store_->changes(), mark, 10'000); }).ok());
  sched::Snapshot m = meta_;
  m.nodes = {node("n1"), node("n2")};
  EXPECT_EQ(warm_.differences(m, live_), "work t-a.1 missing");
  m.nodes = {node("n1")};
  EXPECT_NE(warm_.differences(m, live_).find("node c1/n2 kept but gone"), std::string::npos);
}

}  // namespace
}  // namespace cp
