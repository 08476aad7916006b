// Store::write may run its body more than once (a busy SQLite, a PostgreSQL
// serialization conflict): only the last run's writes are kept, so nothing a
// rolled-back run computed may reach the caller. A store that runs every
// write body twice, rolling the first run back, pins that for the control
// plane's writers.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "model/documents.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "forwarding_store.h"
#include "store/store.h"

namespace cp {
namespace {

class EveryWriteRunsTwice final : public testing::ForwardingStore {
 public:
  explicit EveryWriteRunsTwice(Store& inner) : ForwardingStore(inner) {}
  Status write(const std::function<Status(Tx&)>& body) override {
    // First run: whatever it does is rolled back, as after a conflict.
    Status first = inner_.write([&](Tx& tx) -> Status {
      (void)body(tx);
      return Error{"simulated_conflict", 503, "rolled back on purpose", "故意回滚", {}};
    });
    EXPECT_FALSE(first.ok());
    return inner_.write(body);
  }
};

constexpr std::string_view kFleet = R"(
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c1}
spec: {executor: local, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1]
  quota:
    cpu: {guaranteed: "8"}
    memory: {guaranteed: 8Gi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pa}
spec: {default_resource_group: rg-a}
)";

class RetriedWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cp-retried-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    inner_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(inner_->migrate().ok());
    store_ = std::make_unique<EveryWriteRunsTwice>(*inner_);
    objects_ = std::move(open_object_store("file://" + dir_.string())).value();
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, ServerConfig{});
    admin_.user = "admin";
    admin_.role = PlatformRole::admin;
    ASSERT_TRUE(apply_fleet(*cp_, parse_fleet_config(kFleet).value()).ok());
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> inner_, store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Principal admin_;
};

TEST_F(RetriedWritesTest, ASubmitAnswersWithTheTasksThatWereStoredAndAnAgentGetsOnlyStoredAttempts) {
  auto doc = parse_document(
      "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\n"
      "spec:\n  steps:\n    - {name: a, command: [\"true\"], resources: {cpu: \"1\"}}\n"
      "    - {name: b, command: [\"true\"], resources: {cpu: \"1\"}}\n");
  ASSERT_TRUE(doc.ok());
  auto submitted = cp_->submit_pipeline(admin_, *doc);
  ASSERT_TRUE(submitted.ok()) << submitted.error().message;
  const auto& tasks = submitted->at("tasks").as_array();
  ASSERT_EQ(tasks.size(), 2u);
  for (const auto& t : tasks) {
    EXPECT_TRUE(cp_->get_task(admin_, std::string(t.at("id").as_string())).ok()) << t;
  }
  const std::string pipeline_id(submitted->at("pipeline").at("id").as_string());
  EXPECT_TRUE(cp_->get_pipeline(admin_, pipeline_id).ok()) << pipeline_id;

  // The agent's orders name attempts that exist, once each.
  auto boot = cp_->create_bootstrap_token(admin_, "c1", json::value(nullptr));
  ASSERT_TRUE(boot.ok());
  auto reg = cp_->agent_register({"c1", std::string(boot->at("token").as_string()), "i-1", "test"}, "");
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  auto agent = cp_->authenticate_agent(reg->credential).value();
  SyncRequest sync;
  sync.cluster_id = "c1";
  sync.agent_instance = "i-1";
  NodeReport n;
  n.name = "n1";
  n.capacity = Resources::parse_or_die("cpu:8,memory:8Gi");
  n.allocatable = n.capacity;
  sync.nodes = {n};
  ASSERT_TRUE(cp_->agent_sync(agent, sync).ok());
  ASSERT_TRUE(cp_->schedule_once().ok());
  sync.seq = 2;
  auto orders = cp_->agent_sync(agent, sync);
  ASSERT_TRUE(orders.ok()) << orders.error().message;
  ASSERT_EQ(orders->start.size(), 2u);
  std::set<std::string> seen;
  for (const auto& o : orders->start) {
    EXPECT_TRUE(seen.insert(o.attempt_id).second) << "started twice: " << o.attempt_id;
    auto task = cp_->get_task(admin_, o.task_id);
    ASSERT_TRUE(task.ok());
    bool recorded = false;
    for (const auto& a : task->at("attempts").as_array()) recorded |= a.at("id").as_string() == o.attempt_id;
    EXPECT_TRUE(recorded) << o.attempt_id;
  }
}

}  // namespace
}  // namespace cp
