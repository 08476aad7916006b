#include "model/inventory.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

NodeReport node(const std::string& name, int gpus) {
  NodeReport n;
  n.name = name;
  n.labels = {{"gpu-type", "a100"}};
  n.capacity = Resources::parse_or_die("cpu:16,memory:64Gi,gpu/a100:" + std::to_string(gpus));
  n.allocatable = n.capacity;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(GpuDevice{i, "uuid-" + std::to_string(i), "a100", 80, 0, 0});
  return n;
}

class Reporter : public ::testing::Test {
 protected:
  // One sync: fill from the current nodes at `now`, then (when `answered`) the server's answer.
  SyncRequest sync(Millis now, bool answered = true, SyncResponse resp = {}) {
    SyncRequest req;
    reporter_.fill(req, nodes_, inventory_fingerprint(nodes_), now);
    if (answered) reporter_.answered(resp);
    return req;
  }
  std::vector<NodeReport> nodes_{node("n1", 2), node("n2", 2)};
  InventoryReporter reporter_{60'000};
};

TEST(InventoryFingerprint, IgnoresTheLiveGpuFiguresOnly) {
  std::vector<NodeReport> a{node("n1", 2)};
  auto b = a;
  b[0].gpus[1].utilization = 93;
  b[0].gpus[1].memory_used = 70;
  EXPECT_EQ(inventory_fingerprint(a), inventory_fingerprint(b));
  b[0].labels["zone"] = "b";
  EXPECT_NE(inventory_fingerprint(a), inventory_fingerprint(b));
  auto c = a;
  c[0].gpus[1].uuid = "uuid-other";
  EXPECT_NE(inventory_fingerprint(a), inventory_fingerprint(c));
  auto d = a;
  d[0].ready = false;
  EXPECT_NE(inventory_fingerprint(a), inventory_fingerprint(d));
  EXPECT_NE(inventory_fingerprint(a), inventory_fingerprint({}));
}

TEST_F(Reporter, SendsTheNodesFirstThenOnlyTheirFingerprint) {
  auto first = sync(1000);
  EXPECT_EQ(first.nodes.size(), 2u);
  EXPECT_FALSE(first.nodes_unchanged);
  EXPECT_EQ(first.inventory, inventory_fingerprint(nodes_));
  auto second = sync(2000);
  EXPECT_TRUE(second.nodes.empty());
  EXPECT_TRUE(second.nodes_unchanged);
  EXPECT_EQ(second.inventory, first.inventory);
  EXPECT_TRUE(second.gpu_figures.empty());
}

TEST_F(Reporter, SendsTheGpuFiguresThatMovedOnce) {
  sync(1000);
  nodes_[1].gpus[0].utilization = 40;
  nodes_[1].gpus[0].memory_used = 9;
  auto moved = sync(2000);
  EXPECT_TRUE(moved.nodes_unchanged);
  ASSERT_EQ(moved.gpu_figures.size(), 1u);
  EXPECT_EQ(moved.gpu_figures[0].node, "n2");
  EXPECT_EQ(moved.gpu_figures[0].utilization, (std::vector<int>{40, 0}));
  EXPECT_EQ(moved.gpu_figures[0].memory_used, (std::vector<std::int64_t>{9, 0}));
  EXPECT_TRUE(sync(3000).gpu_figures.empty()) << "the server holds them now";
}

TEST_F(Reporter, ResendsWhatAFailedSyncCarried) {
  sync(1000, false);  // the first sync got no answer
  EXPECT_EQ(sync(2000).nodes.size(), 2u);
  nodes_[0].gpus[1].utilization = 7;
  EXPECT_EQ(sync(3000, false).gpu_figures.size(), 1u);
  EXPECT_EQ(sync(4000).gpu_figures.size(), 1u) << "not answered: sent again";
  EXPECT_TRUE(sync(5000).gpu_figures.empty());
}

TEST_F(Reporter, SendsTheNodesWhenTheyChangeOrTheServerAsksOrTimeHasCome) {
  sync(1000);
  nodes_[0].labels["maintenance"] = "true";
  auto changed = sync(2000);
  EXPECT_EQ(changed.nodes.size(), 2u);
  EXPECT_NE(changed.inventory, "");
  EXPECT_TRUE(sync(3000).nodes_unchanged);

  SyncResponse ask;
  ask.send_inventory = true;
  EXPECT_TRUE(sync(4000, true, ask).nodes_unchanged);
  EXPECT_EQ(sync(5000).nodes.size(), 2u) << "asked for";
  EXPECT_TRUE(sync(6000).nodes_unchanged);

  EXPECT_TRUE(sync(64'999).nodes_unchanged);
  EXPECT_EQ(sync(65'000).nodes.size(), 2u) << "full_every_ms after the last full send";

  reporter_.reset();
  EXPECT_EQ(sync(66'000).nodes.size(), 2u) << "after a reset";
}

TEST_F(Reporter, AnEmptyInventoryIsStillAnInventory) {
  nodes_.clear();
  auto first = sync(1000);
  EXPECT_FALSE(first.nodes_unchanged);
  EXPECT_TRUE(sync(2000).nodes_unchanged);
}

}  // namespace
}  // namespace cp
