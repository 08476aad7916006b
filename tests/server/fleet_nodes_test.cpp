// FleetNodes (server/fleet_nodes.h): the background passes' nodes, read from
// the store only for clusters whose nodes were written since.
#include "server/fleet_nodes.h"

#include <gtest/gtest.h>

#include "store/store.h"

namespace cp {
namespace {

class FleetNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    for (const std::string id : {"c1", "c2"}) {
      auto st = store_->write([&](Tx& tx) -> Status {
        Cluster c;
        c.id = id;
        c.display_name = id;
        CP_TRY(tx.insert_cluster(c));
        for (const std::string name : {"n1", "n2"}) CP_TRY(tx.upsert_node(node(id, name, true)));
        return {};
      });
      ASSERT_TRUE(st.ok()) << st.error().to_string();
    }
  }

  static Node node(const std::string& cluster, const std::string& name, bool ready) {
    Node n;
    n.cluster_id = cluster;
    n.name = name;
    n.ready = ready;
    return n;
  }

  // One pass: the nodes it saw, as "cluster/name" (and "!" when NotReady).
  std::vector<std::string> pass(FleetNodes& fleet, std::optional<FleetNodes::Marks> marks = std::nullopt) {
    const auto m = marks ? *marks : fleet.marks();
    std::vector<std::string> seen;
    EXPECT_TRUE(store_->read([&](Tx& tx) -> Status {
      CP_ASSIGN(auto clusters, tx.list_clusters());
      return fleet.visit(tx, m, clusters, [&](const NodeSummary& n) {
        seen.push_back(n.cluster_id + "/" + n.name + (n.ready ? "" : "!"));
      });
    }).ok());
    return seen;
  }

  Status write_node(const Node& n) {
    return store_->write([&](Tx& tx) -> Status { return tx.upsert_node(n); });
  }

  std::unique_ptr<Store> store_;
};

TEST_F(FleetNodesTest, ReadsEachClusterOnceWhileNothingIsWritten) {
  FleetNodes fleet;
  const std::vector<std::string> all{"c1/n1", "c1/n2", "c2/n1", "c2/n2"};
  EXPECT_EQ(pass(fleet), all);
  EXPECT_EQ(fleet.clusters_read(), 2);
  EXPECT_EQ(pass(fleet), all);
  EXPECT_EQ(pass(fleet), all);
  EXPECT_EQ(fleet.clusters_read(), 2) << "from memory";
}

TEST_F(FleetNodesTest, ACommitThatSaysItWroteNodesHasItsClusterReadAgain) {
  FleetNodes fleet;
  pass(fleet);
  ASSERT_TRUE(write_node(node("c2", "n2", false)).ok());
  fleet.changed("c2");
  EXPECT_EQ(pass(fleet), (std::vector<std::string>{"c1/n1", "c1/n2", "c2/n1", "c2/n2!"}));
  EXPECT_EQ(fleet.clusters_read(), 3) << "c2 alone";
}

// The race the marks are for: a pass marks, then a commit and its changed()
// land, then the pass reads. Whatever it read then, the next pass reads c1
// again and sees the write.
TEST_F(FleetNodesTest, AWriteBetweenTheMarksAndTheReadIsSeenByTheNextPass) {
  FleetNodes fleet;
  pass(fleet);
  const auto early = fleet.marks();
  ASSERT_TRUE(write_node(node("c1", "n1", false)).ok());
  fleet.changed("c1");
  pass(fleet, early);
  EXPECT_EQ(pass(fleet), (std::vector<std::string>{"c1/n1!", "c1/n2", "c2/n1", "c2/n2"}));
}

TEST_F(FleetNodesTest, DeletedClustersAndNodesAreGone) {
  FleetNodes fleet;
  pass(fleet);
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
    CP_TRY(tx.delete_node("c1", "n2"));
    return tx.delete_cluster("c2");
  }).ok());
  fleet.changed("c1");
  fleet.changed("c2");
  EXPECT_EQ(pass(fleet), (std::vector<std::string>{"c1/n1"}));
}

// Anything written behind the server's back (a restored database) shows
// within twice refresh_every passes of the first read, then within
// refresh_every passes.
TEST_F(FleetNodesTest, EveryClusterIsReadAgainWithinRefreshEveryPasses) {
  FleetNodes fleet(3);
  pass(fleet);
  ASSERT_TRUE(write_node(node("c1", "n1", false)).ok());  // no changed()
  for (int i = 0; i < 5; ++i) pass(fleet);
  EXPECT_EQ(pass(fleet).front(), "c1/n1!");
  ASSERT_TRUE(write_node(node("c1", "n1", true)).ok());
  for (int i = 0; i < 2; ++i) pass(fleet);
  EXPECT_EQ(pass(fleet).front(), "c1/n1");
}

}  // namespace
}  // namespace cp
