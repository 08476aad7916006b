// The free order (free_order.h, CycleState::best_single): the best node for
// one replica is the node select_gang picks from every feasible node, for
// both policies, with and without holds and on an overlay, for any project,
// as loads change; and CycleState::fitting_nodes gives feasible_nodes' nodes
// (gangs and gpu/any too); CycleState::best_single_per_type gives the
// attempts select_gang makes for one replica of gpu/any, and with the GPU
// types quota refuses left out, the placement fit_shape gives when asked why.
#include <deque>
#include <random>

#include "harness.h"
#include "sched/cycle_state.h"
#include "sched/feasible.h"
#include "sched/fit.h"
#include "sched/select.h"

namespace cp::sched::testing {
namespace {

const Labels kA100Label{{"gpu-type", "nvidia-a100-80gb"}};
const Labels kH100Label{{"gpu-type", "nvidia-h100-80gb"}};

class FreeOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(11);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    for (const std::string c : {"c1", "c2"}) {
      auto cluster = fleet.cluster(c);
      for (int i = 0; i < 10; ++i) {
        bool h100 = i % 3 == 0;
        std::string name = c + "-g" + std::to_string(i);
        cluster.node(name, h100 ? "cpu:96,memory:1Ti,gpu/nvidia-h100-80gb:8" : "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:8",
                     h100 ? kH100Label : kA100Label);
      }
      for (int i = 0; i < 4; ++i) cluster.node(c + "-cpu" + std::to_string(i), "cpu:64,memory:256Gi");
    }
    // A node offering two types (its own, by label, is the H100) and one of
    // a type of its own: gpu/any attempts go by a node's own type.
    fleet.cluster("c1").node("c1-mixed", "cpu:64,memory:512Gi,gpu/nvidia-a100-80gb:4,gpu/nvidia-h100-80gb:4",
                              kH100Label);
    fleet.cluster("c2").node("c2-plain", "cpu:64,memory:512Gi,gpu/nvidia-l4:2");
    fleet.node("c1", "c1-g4").ready = false;
    fleet.node("c2", "c2-g5").maintenance = true;
    group("rg", "gpu/nvidia-a100-80gb:400,gpu/nvidia-h100-80gb:400,cpu:4000", {"c1", "c2"});
    // Work of three projects (or none), leaving every kind of free: many
    // nodes alike, so ties by node index count.
    int id = 0;
    for (const auto& n : fleet.snapshot.nodes) {
      bool gpu_node = n.name.find("-g") != std::string::npos;
      int pieces = pick(4);
      int next_gpu = 0;
      for (int p = 0; p < pieces; ++p) {
        std::string res = "cpu:" + std::to_string(2 * (1 + pick(8))) + ",memory:" + std::to_string(8 * (1 + pick(4))) + "Gi";
        std::vector<int> gpus;
        if (gpu_node) {
          int g = 1 << pick(3);
          if (next_gpu + g > 8) break;
          for (int k = 0; k < g; ++k) gpus.push_back(next_gpu++);
          bool h100 = n.labels.at("gpu-type") == "nvidia-h100-80gb";
          res += std::string(",") + (h100 ? "gpu/nvidia-h100-80gb:" : "gpu/nvidia-a100-80gb:") + std::to_string(g);
        }
        auto& w = fleet.running("w" + std::to_string(id++), "rg", n.cluster_id, res, {{0, n.name, gpus}});
        int project = pick(4);
        w.project_group = project == 3 ? "" : "pg-" + std::to_string(project);
      }
    }
  }
  ResourceGroup& group(const std::string& name, std::string_view quota, std::vector<std::string> clusters) {
    return fleet.group(name, quota, std::move(clusters));
  }

  // best_single against feasible_nodes + select_gang, for many requests.
  void expect_same_best(CycleState& state, const std::string& when) {
    int compared = 0;
    fitting_compared = 0;
    any_compared = 0;
    const ResourceGroup& g = *state.group("rg");
    std::vector<std::string> clusters{"c1", "c2"};
    std::vector<std::vector<std::string>> cluster_sets{clusters, {"c1"}, {"c2"}};
    std::vector<Request> requests;
    std::deque<Task> tasks;  // a Request views its task's resources
    for (std::string_view type : {kA100, kH100}) {
      for (int gpus : {1, 2, 4, 8}) {
        for (int cpu : {0, 8, 40}) {
          Task& t = tasks.emplace_back();
          t.step.resources = res(std::string(type) + ":" + std::to_string(gpus) + (cpu ? ",cpu:" + std::to_string(cpu) : ""));
          Request r = *request_of(t);
          r.gpu_type_id = state.gpu_type_id(r.gpu_type);
          requests.push_back(r);
        }
      }
    }
    for (std::string_view spec : {"cpu:4", "cpu:30,memory:100Gi", "memory:200Gi", "cpu:64", "gpu/any:1", "gpu/any:4,cpu:40"}) {
      Task& t = tasks.emplace_back();
      t.step.resources = res(spec);
      requests.push_back(*request_of(t));
    }
    for (int replicas : {2, 5}) {
      Task& t = tasks.emplace_back();
      t.step.resources = res("gpu/nvidia-a100-80gb:4,cpu:8");
      t.step.replicas = replicas;
      Request r = *request_of(t);
      r.gpu_type_id = state.gpu_type_id(r.gpu_type);
      requests.push_back(r);
    }
    ModeView no_holds(state, LoadMode::kNoHolds);
    // Some running work gone, as a victim search sees it.
    Overlay freed(state);
    std::vector<std::size_t> taken;
    for (std::size_t w : {0, 3, 7, 12, 20}) {
      state.take_out(w, freed);
      taken.push_back(w);
    }
    Task task;
    task.id = "t";
    for (const Request& r : requests) {
      for (const auto& cs : cluster_sets) {
        for (const LoadView* loads : {static_cast<const LoadView*>(&state), static_cast<const LoadView*>(&no_holds),
                                      static_cast<const LoadView*>(&freed)}) {
          auto got = state.fitting_nodes(*loads, cs, g, r);
          if (!got) continue;
          ++fitting_compared;
          ASSERT_EQ(*got, feasible_nodes(state, *loads, cs, g, r, false).fit)
              << when << ": " << r.per_replica().to_string() << " x" << r.replicas
              << (loads == &state ? "" : (loads == &freed ? " on an overlay" : " without holds"));
        }
        if (r.replicas != 1) continue;
        for (ProjectId project : {kNoProject, state.project("pg-0"), state.project("pg-1"), state.project("pg-9")}) {
          for (PlacementPolicy policy : {PlacementPolicy::binpack, PlacementPolicy::spread}) {
            for (const LoadView* loads : {static_cast<const LoadView*>(&state), static_cast<const LoadView*>(&no_holds),
                                          static_cast<const LoadView*>(&freed)}) {
              NodeFeasibility nodes = feasible_nodes(state, *loads, cs, g, r, false);
              SelectOptions options;
              options.loads = loads;
              options.policy = policy;
              options.project = project;
              Selection want = select_gang(state, g, task, r, nodes.fit, options);
              if (r.any_gpu()) {
                // gpu/any: each (cluster, type)'s best from the order, then the same attempts.
                auto best = state.best_single_per_type(*loads, cs, g, r, project, policy);
                if (!best) continue;  // the first few asks, before the order is built
                ++any_compared;
                Selection got = best->empty() ? Selection{} : select_any_single(state, g, task, r, *best, options);
                ASSERT_EQ(got.placement.has_value(), want.placement.has_value())
                    << when << ": " << r.per_replica().to_string() << " project " << project;
                if (!got.placement) continue;
                ASSERT_EQ(got.placement->cluster_id + "/" + got.placement->placements.front().node + " " +
                              got.placement->per_replica.to_string(),
                          want.placement->cluster_id + "/" + want.placement->placements.front().node + " " +
                              want.placement->per_replica.to_string())
                    << when << ": " << r.per_replica().to_string() << " project " << project << " policy "
                    << (policy == PlacementPolicy::spread ? "spread" : "binpack")
                    << (loads == &state ? "" : (loads == &freed ? " on an overlay" : " without holds"));
                continue;
              }
              CycleState::Best got = state.best_single(*loads, cs, g, r, project, policy);
              if (!got.applies) continue;  // the first few asks, before the order is built
              ++compared;
              ASSERT_EQ(got.node.has_value(), want.placement.has_value())
                  << when << ": " << r.per_replica().to_string() << " project " << project;
              if (!got.node) continue;
              const NodeView& v = state.nodes()[*got.node];
              ASSERT_EQ(v.cluster_id() + "/" + v.name(),
                        want.placement->cluster_id + "/" + want.placement->placements.front().node)
                  << when << ": " << r.per_replica().to_string() << " project " << project << " policy "
                  << (policy == PlacementPolicy::spread ? "spread" : "binpack")
                  << (loads == &state ? "" : (loads == &freed ? " on an overlay" : " without holds"));
            }
          }
        }
      }
    }
    for (std::size_t w : taken) state.put_back(w, freed);
    EXPECT_GT(compared, 1000) << when;
    EXPECT_GT(fitting_compared, 100) << when;
    EXPECT_GT(any_compared, 100) << when;
  }
  int fitting_compared = 0;
  int any_compared = 0;

  // Both clusters usable, as prepare() would say for a plain task.
  static std::shared_ptr<const ClusterFeasibility> both_clusters() {
    auto clusters = std::make_shared<ClusterFeasibility>();
    clusters->usable = {"c1", "c2"};
    return clusters;
  }

  // A one-shape task of `group` asking `resources` (per replica), on both
  // clusters, as fit_shape takes it: `t` must outlive the context.
  static TaskContext context_for(CycleState& state, Task& t, const std::string& id, const std::string& group,
                                 const std::string& project, std::string_view resources,
                                 std::shared_ptr<const ClusterFeasibility> clusters, int replicas = 1) {
    t.id = id;
    t.resource_group = group;
    t.project_group = project;
    t.step.resources = res(resources);
    t.step.replicas = replicas;
    TaskContext c;
    c.task = &t;
    c.group = state.group(group);
    c.project = state.project(project);
    c.clusters = std::move(clusters);
    c.shapes.push_back(*request_of(t));
    return c;
  }

  Fleet fleet;
};

TEST_F(FreeOrderTest, GpuAnyAskedOnlyWhereItFitsSkipsTheTypesQuotaRefusesAndPlacesTheSame) {
  // A group with H100 quota only (the A100s are refused, however free) and
  // one with a little of both: as loads change, a gpu/any fit asked only for
  // its placement (kPlacement: types quota refuses are not walked) places
  // exactly where the full fit (kReasons) does, or nowhere when it does not.
  group("rg-h100", "gpu/nvidia-h100-80gb:24,cpu:4000", {"c1", "c2"});
  group("rg-few", "gpu/nvidia-a100-80gb:6,gpu/nvidia-h100-80gb:3,cpu:4000", {"c1", "c2"});
  CycleState state(fleet.snapshot);
  const auto clusters = both_clusters();
  int compared = 0;
  int placed = 0;
  int types_left_out = 0;
  for (int round = 0; round < 40; ++round) {
    for (const std::string group_name : {"rg-h100", "rg-few"}) {
      for (int gpus : {1, 2, 4}) {
        Task t;
        TaskContext c = context_for(state, t, "t" + std::to_string(round) + "-" + group_name + "-" + std::to_string(gpus),
                                    group_name, "pg-" + std::to_string(round % 3),
                                    "cpu:4,memory:16Gi,gpu/any:" + std::to_string(gpus), clusters);
        Fit full = fit_shape(state, state, c, c.shapes.front(), true, nullptr, Want::kReasons);
        Fit only = fit_shape(state, state, c, c.shapes.front(), true, nullptr, Want::kPlacement);
        ++compared;
        ASSERT_EQ(only.placement.has_value(), full.placement.has_value()) << t.id;
        // The walk with a filter never offers a node of a refused type.
        auto refused = [&](std::string_view type) {
          return !state.quota().fits(*c.group, "gpu/" + std::string(type), gpus, 1, true);
        };
        if (auto some = state.best_single_per_type(state, clusters->usable, *c.group, c.shapes.front(), c.project,
                                                   PlacementPolicy::binpack,
                                                   [&](std::string_view type) { return !refused(type); })) {
          auto all = state.best_single_per_type(state, clusters->usable, *c.group, c.shapes.front(), c.project,
                                                PlacementPolicy::binpack);
          for (const auto& b : *some) EXPECT_FALSE(refused(b.gpu_type)) << t.id << " " << b.gpu_type;
          ASSERT_TRUE(all.has_value());
          types_left_out += static_cast<int>(all->size() - some->size());
        }
        if (!full.placement) continue;
        ++placed;
        EXPECT_EQ(only.placement->cluster_id + "/" + only.placement->placements.front().node + " " +
                      only.placement->per_replica.to_string(),
                  full.placement->cluster_id + "/" + full.placement->placements.front().node + " " +
                      full.placement->per_replica.to_string())
            << t.id;
        // Taken, so the next round sees fuller nodes and less quota.
        state.commit(t, *full.placement);
      }
    }
  }
  EXPECT_EQ(compared, 240);
  EXPECT_GT(placed, 10);
  EXPECT_LT(placed, compared);  // quota ran out for some
  EXPECT_GT(types_left_out, 50);
}

TEST_F(FreeOrderTest, ANodeOnlyFitNamesTheNodeTheFullFitPlacesOnAndBuildsNoPlacement) {
  // Asked for its node only (Want::kNode: "behind a reservation", a victim
  // set's drop pass), a one-replica fit from the free order gives the node
  // index and no Placement (gpu/any too: the best node of the types quota
  // admits); it is the node the full fit places on, as loads change. Gangs,
  // and fits before the order is built, still answer with a placement.
  group("rg-both", "gpu/nvidia-a100-80gb:40,gpu/nvidia-h100-80gb:40,cpu:4000", {"c1", "c2"});
  CycleState state(fleet.snapshot);
  const auto clusters = both_clusters();
  struct {
    int by_node = 0, any_by_node = 0, by_placement = 0, none = 0;
  } seen;
  const std::vector<std::string> asks = {"cpu:4,memory:16Gi,gpu/nvidia-a100-80gb:1", "cpu:8,gpu/nvidia-h100-80gb:2",
                                         "cpu:2,memory:8Gi", "cpu:4,gpu/any:1"};
  for (int round = 0; round < 60; ++round) {
    for (std::size_t a = 0; a < asks.size(); ++a) {
      Task t;
      TaskContext c = context_for(state, t, "k" + std::to_string(round) + "-" + std::to_string(a), "rg-both",
                                  "pg-" + std::to_string(round % 3), asks[a], clusters, round % 7 == 6 ? 2 : 1);
      Fit full = fit_shape(state, state, c, c.shapes.front(), true, nullptr, Want::kReasons);
      Fit node = fit_shape(state, state, c, c.shapes.front(), true, nullptr, Want::kNode);
      ASSERT_FALSE(node.node && node.placement) << t.id;
      ASSERT_EQ(node.node || node.placement, full.placement.has_value()) << t.id;
      if (!full.placement) {
        ++seen.none;
        continue;
      }
      const std::string want = full.placement->cluster_id + "/" + full.placement->placements.front().node;
      if (node.node) {
        ++seen.by_node;
        EXPECT_EQ(t.step.replicas, 1) << t.id;
        if (asks[a].find("gpu/any") != std::string::npos) ++seen.any_by_node;
        const NodeView& v = state.nodes()[*node.node];
        EXPECT_EQ(v.cluster_id() + "/" + v.name(), want) << t.id;
      } else {
        ++seen.by_placement;
        EXPECT_EQ(node.placement->cluster_id + "/" + node.placement->placements.front().node, want) << t.id;
      }
      state.commit(t, *full.placement);
    }
  }
  EXPECT_GT(seen.by_node, 30);
  EXPECT_GT(seen.any_by_node, 5);
  EXPECT_GT(seen.by_placement, 10);
  EXPECT_GT(seen.none, 0);
}

TEST_F(FreeOrderTest, TheBestNodeIsTheOneSelectionPicksFromEveryFeasibleNode) {
  // As built, then after placements and holds change loads (and in a
  // cycle's put-back), the walk finds select_gang's node.
  CycleState state(fleet.snapshot);
  expect_same_best(state, "built");
  state.begin_cycle();
  Task t;
  t.id = "p1";
  t.resource_group = "rg";
  t.project_group = "pg-2";
  Placement p{"p1", "c1", {ReplicaPlacement{0, "c1-g1", {6, 7}}}, res("gpu/nvidia-a100-80gb:2,cpu:6"), 0, false};
  state.commit(t, p);
  Placement h{"p2", "c2", {ReplicaPlacement{0, "c2-g2", {}}, ReplicaPlacement{0, "c2-cpu1", {}}},
              res("gpu/nvidia-a100-80gb:1,cpu:20,memory:64Gi"), 0, false};
  t.id = "p2";
  state.hold(t, h);
  expect_same_best(state, "placed and held");
  if (HasFailure()) return;
  state.end_cycle();
  expect_same_best(state, "after the cycle");
}

TEST(FreeOrderManyTypes, GpuAnyFindsNodesOfTypesPastTheOrderedOnes) {
  // 70 GPU types: types numbered past 64 have no order of their own, so
  // their nodes are asked one by one; the attempts are still select_gang's.
  Fleet fleet;
  auto cluster = fleet.cluster("c1");
  std::string quota;
  for (int i = 0; i < 70; ++i) {
    std::string type = "gpu/t" + std::to_string(100 + i);
    int gpus = 1 + i % 8;
    // Fewer cpus past the ordered types: binpack ranks those nodes first.
    cluster.node("n" + std::to_string(100 + i),
                 std::string(i < 64 ? "cpu:64" : "cpu:16") + ",memory:512Gi," + type + ":" + std::to_string(gpus));
    quota += (i ? "," : "") + type + ":100";
  }
  fleet.group("rg", quota, {"c1"});
  CycleState state(fleet.snapshot);
  const ResourceGroup& g = *state.group("rg");
  Task task;
  task.id = "t";
  int compared = 0;
  int past_ordered = 0;  // placements on a node of a type numbered past 64
  for (int round = 0; round < 100; ++round) {
    for (int gpus : {1, 3, 6}) {
      for (PlacementPolicy policy : {PlacementPolicy::binpack, PlacementPolicy::spread}) {
        Task t;
        t.step.resources = res("gpu/any:" + std::to_string(gpus));
        Request r = *request_of(t);
        SelectOptions options;
        options.loads = &state;
        options.policy = policy;
        Selection want = select_gang(state, g, task, r, feasible_nodes(state, state, {"c1"}, g, r, false).fit, options);
        auto best = state.best_single_per_type(state, {"c1"}, g, r, kNoProject, policy);
        if (!best) continue;
        ++compared;
        Selection got = best->empty() ? Selection{} : select_any_single(state, g, task, r, *best, options);
        ASSERT_EQ(got.placement.has_value(), want.placement.has_value());
        if (!got.placement) continue;
        ASSERT_EQ(got.placement->placements.front().node, want.placement->placements.front().node)
            << gpus << (policy == PlacementPolicy::spread ? " spread" : " binpack");
        if (policy == PlacementPolicy::binpack) past_ordered += got.placement->placements.front().node >= "n164";
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(past_ordered, 50);
}

}  // namespace
}  // namespace cp::sched::testing
