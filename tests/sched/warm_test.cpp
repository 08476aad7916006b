// The state kept between cycles (Scheduler, warm.h): after any sequence of
// deltas, its plan is the plan decide() makes from the equivalent snapshot,
// and a cycle leaves no trace in it.
#include <random>

#include "harness.h"
#include "sched/warm.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
const Labels kH100Label{{"gpu-type", "nvidia-h100-80gb"}};
constexpr std::string_view kA100Node = "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8";
constexpr std::string_view kH100Node = "cpu:96,memory:1Ti,gpu/nvidia-h100-80gb:8";
constexpr Millis kMinute = 60'000;

class WarmTest : public SchedTest {
 protected:
  void SetUp() override {
    fleet.priority_classes(/*urgent_after_s=*/600);
    auto c1 = fleet.cluster("c1", {{"region", "east"}});
    for (int i = 1; i <= 6; ++i) c1.node("a" + std::to_string(i), kA100Node, kA100Label);
    c1.node("cpu1", "cpu:64,memory:256Gi");
    auto c2 = fleet.cluster("c2", {{"region", "west"}});
    for (int i = 1; i <= 4; ++i) c2.node("h" + std::to_string(i), kH100Node, kH100Label);
    group("rg-a", "gpu/nvidia-a100-80gb:16,gpu/nvidia-h100-80gb:8,cpu:256", {"c1", "c2"});
    group("rg-b", "gpu/nvidia-a100-80gb:16,cpu:128", {"c1"});
    group("rg-c", "gpu/nvidia-h100-80gb:16", {"c2"}, PlacementPolicy::spread);
    fleet.borrow("rg-a", std::string(kA100), "32", "shared");
    fleet.borrow("rg-b", std::string(kA100), "32", "shared");
    // Work on most nodes, some of it borrowed, one attempt already stopping.
    for (int i = 1; i <= 5; ++i) {
      std::string node = "a" + std::to_string(i);
      auto& w = fleet.running("b" + std::to_string(i), i % 2 ? "rg-b" : "rg-a", "c1", "gpu/nvidia-a100-80gb:4",
                              {{0, node, {0, 1, 2, 3}}});
      w.started_at = kT0 - i * kMinute;
      w.checkpoint = i == 3;
    }
    fleet.running("c1", "rg-c", "c2", "gpu/nvidia-h100-80gb:8", {{0, "h1", {0, 1, 2, 3, 4, 5, 6, 7}}});
    fleet.running("c2", "rg-c", "c2", "gpu/nvidia-h100-80gb:4", {{0, "h2", {0, 1, 2, 3}}, {1, "h3", {0, 1, 2, 3}}});
    fleet.running("s1", "rg-b", "c1", "gpu/nvidia-a100-80gb:2", {{0, "a6", {0, 1}}}).stopping = true;

    // A queue that asks for every part of the cycle: placements, gangs,
    // gpu/any, reservations, preemption (urgent, past its wait), quota.
    queue.task("q-gang", "rg-b", "gpu/nvidia-a100-80gb:8", 2).queued_at(kT0 - 30 * kMinute);
    queue.task("q-one", "rg-b", "gpu/nvidia-a100-80gb:1").queued_at(kT0 - 20 * kMinute);
    queue.task("q-two", "rg-a", "gpu/nvidia-a100-80gb:2").queued_at(kT0 - 19 * kMinute).owner("pg-x", "bob");
    queue.task("q-any", "rg-a", "gpu/any:4").queued_at(kT0 - 18 * kMinute);
    queue.task("q-h100", "rg-c", "gpu/nvidia-h100-80gb:4", 2).queued_at(kT0 - 17 * kMinute);
    queue.task("q-urgent", "rg-a", "gpu/nvidia-a100-80gb:8")
        .queued_at(kT0 - 15 * kMinute)
        .priority_class("urgent", 1000);
    queue.task("q-urgent-h", "rg-c", "gpu/nvidia-h100-80gb:8")
        .queued_at(kT0 - 14 * kMinute)
        .priority_class("urgent", 1000);
    queue.task("q-cpu", "rg-a", "cpu:8,memory:16Gi").queued_at(kT0 - 10 * kMinute);
    queue.task("q-west", "rg-a", "gpu/nvidia-h100-80gb:2")
        .queued_at(kT0 - 9 * kMinute)
        .cluster_selector({{"region", "west"}});
    queue.task("q-big", "rg-b", "gpu/nvidia-a100-80gb:8", 4).queued_at(kT0 - 8 * kMinute);
    queue.task("q-later", "rg-b", "gpu/nvidia-a100-80gb:2")
        .queued_at(kT0 - 2 * kMinute)
        .fallback(60, "gpu/nvidia-h100-80gb:2");
  }

  // The warm plan, the cold plan on the warm state's own snapshot, and the
  // cold plan on the snapshot the test keeps itself, all the same.
  void expect_same_plans(Scheduler& warm, const std::string& step) {
    Plan hot = warm.decide(queue.tasks, kT0);
    Plan cold = decide(fleet.snapshot, queue.tasks, kT0);
    Plan cold_of_warm = decide(warm.snapshot(), queue.tasks, kT0);
    EXPECT_EQ(describe(hot), describe(cold)) << "after " << step;
    EXPECT_EQ(describe(cold_of_warm), describe(cold)) << "after " << step;
  }

  RunningWork* find(std::string_view attempt) {
    for (auto& w : fleet.snapshot.running) {
      if (w.attempt_id == attempt) return &w;
    }
    return nullptr;
  }
};

TEST_F(WarmTest, APlanOnTheWarmStateIsTheColdPlan) {
  // Built from the snapshot, the warm state plans as decide() does.
  Scheduler warm(fleet.snapshot);
  Plan plan = warm.decide(queue.tasks, kT0);
  Plan cold = run();
  EXPECT_EQ(describe(plan), describe(cold));
  EXPECT_FALSE(cold.placements.empty());
  EXPECT_FALSE(cold.preemptions.empty());
}

TEST_F(WarmTest, ACycleLeavesNoTrace) {
  // Placements, holds and victims of one cycle are not in the next: the same
  // queue gives the same plan again, after an empty queue and another queue too.
  Scheduler warm(fleet.snapshot);
  std::string first = describe(warm.decide(queue.tasks, kT0));
  EXPECT_EQ(describe(warm.decide({}, kT0)), describe(decide(fleet.snapshot, {}, kT0)));
  std::vector<QueuedTask> other(queue.tasks.begin() + 3, queue.tasks.end());
  EXPECT_EQ(describe(warm.decide(other, kT0 + kMinute)), describe(decide(fleet.snapshot, other, kT0 + kMinute)));
  EXPECT_EQ(describe(warm.decide(queue.tasks, kT0)), first);
  EXPECT_EQ(warm.builds(), 1u);
}

TEST_F(WarmTest, EachKindOfDeltaGivesTheColdPlan) {
  // One delta of each kind, checked after each: work starts, is told to
  // stop, ends; a node changes in place; a node is added and removed.
  Scheduler warm(fleet.snapshot);
  RunningWork& started = fleet.running("n1", "rg-a", "c1", "gpu/nvidia-a100-80gb:4", {{0, "a6", {4, 5, 6, 7}}});
  warm.start(started);
  expect_same_plans(warm, "start");

  find("b2.1")->stopping = true;
  EXPECT_TRUE(warm.stopping("b2.1"));
  expect_same_plans(warm, "stopping");

  std::erase_if(fleet.snapshot.running, [](const RunningWork& w) { return w.attempt_id == "s1.1"; });
  EXPECT_TRUE(warm.end("s1.1"));
  EXPECT_FALSE(warm.end("s1.1"));
  expect_same_plans(warm, "end of stopping work");

  std::erase_if(fleet.snapshot.running, [](const RunningWork& w) { return w.attempt_id == "b4.1"; });
  EXPECT_TRUE(warm.end("b4.1"));
  expect_same_plans(warm, "end");

  Node& a1 = fleet.node("c1", "a1");
  a1.maintenance = true;
  warm.update_node(a1);
  expect_same_plans(warm, "maintenance");
  a1.maintenance = false;
  a1.ready = false;
  warm.update_node(a1);
  expect_same_plans(warm, "not ready");
  Node& h4 = fleet.node("c2", "h4");
  h4.label_overrides["zone"] = "b";
  warm.update_node(h4);
  expect_same_plans(warm, "label override");
  EXPECT_EQ(warm.builds(), 1u);  // all of it in place

  fleet.cluster("c2").node("h5", kH100Node, kH100Label);
  warm.update_node(fleet.node("c2", "h5"));
  expect_same_plans(warm, "new node");
  Node& cpu1 = fleet.node("c1", "cpu1");
  cpu1.allocatable = res(kA100Node);
  cpu1.labels = kA100Label;
  warm.update_node(cpu1);
  expect_same_plans(warm, "a node's GPU type");
  EXPECT_TRUE(warm.remove_node("c1", "a2"));
  std::erase_if(fleet.snapshot.nodes, [](const Node& n) { return n.cluster_id == "c1" && n.name == "a2"; });
  expect_same_plans(warm, "node removed (its work stays charged to quota)");
  EXPECT_FALSE(warm.remove_node("c1", "a2"));
}

TEST_F(WarmTest, ALongSequenceOfDeltasGivesTheColdPlanAfterEach) {
  // 120 deltas drawn from a seeded generator: the warm plan equals the cold
  // plan after every one of them.
  Scheduler warm(fleet.snapshot);
  std::mt19937_64 rng(7);
  const std::vector<std::string> a100 = {"a1", "a2", "a3", "a4", "a5", "a6"};
  const std::vector<std::string> h100 = {"h1", "h2", "h3", "h4"};
  int next = 0;
  for (int step = 0; step < 120; ++step) {
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    std::string what;
    switch (pick(6)) {
      case 0:
      case 1: {  // work starts somewhere (GPU indices may overlap: the sums must still agree)
        bool west = pick(3) == 0;
        std::string id = "w" + std::to_string(next++);
        int gpus = 1 << pick(4);
        std::vector<int> indices;
        int first = static_cast<int>(pick(static_cast<std::size_t>(9 - gpus)));
        for (int g = 0; g < gpus; ++g) indices.push_back(first + g);
        std::string type = west ? std::string(kH100) : std::string(kA100);
        const std::string& node = west ? h100[pick(h100.size())] : a100[pick(a100.size())];
        RunningWork& w = fleet.running(id, west ? "rg-c" : (pick(2) ? "rg-a" : "rg-b"), west ? "c2" : "c1",
                                       type + ":" + std::to_string(gpus), {{0, node, indices}});
        w.started_at = kT0 - static_cast<Millis>(pick(60)) * kMinute;
        w.priority = pick(4) == 0 ? 500 : 100;
        w.preemptible = pick(5) != 0;
        w.project_group = pick(2) ? "pg-x" : "pg-y";
        warm.start(w);
        what = "start " + id;
        break;
      }
      case 2: {  // told to stop
        if (fleet.snapshot.running.empty()) continue;
        RunningWork& w = fleet.snapshot.running[pick(fleet.snapshot.running.size())];
        w.stopping = true;
        EXPECT_TRUE(warm.stopping(w.attempt_id));
        what = "stopping " + w.attempt_id;
        break;
      }
      case 3: {  // ends
        if (fleet.snapshot.running.empty()) continue;
        std::size_t i = pick(fleet.snapshot.running.size());
        what = "end " + fleet.snapshot.running[i].attempt_id;
        EXPECT_TRUE(warm.end(fleet.snapshot.running[i].attempt_id));
        fleet.snapshot.running.erase(fleet.snapshot.running.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      case 4: {  // a node in or out of maintenance, ready or not
        bool west = pick(2) == 0;
        Node& n = fleet.node(west ? "c2" : "c1", west ? h100[pick(h100.size())] : a100[pick(a100.size())]);
        if (pick(2)) {
          n.maintenance = !n.maintenance;
        } else {
          n.ready = !n.ready;
        }
        warm.update_node(n);
        what = "node " + n.name;
        break;
      }
      default:
        what = "no change";
        break;
    }
    expect_same_plans(warm, "step " + std::to_string(step) + ": " + what);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace cp::sched::testing
