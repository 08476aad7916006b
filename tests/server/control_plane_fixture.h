// The ControlPlane test fixture: a real SQLite store (in memory) and a local
// object store, a simulated clock, a small fleet (clusters c1 and c2 in pool
// pool-a, resource group rg-a with 4 guaranteed a100 GPUs, project groups
// pa (alice, member) and pb (mallory, admin)), and helpers that act as an
// agent or a user would.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "model/documents.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "store/store.h"

namespace cp::testing {

constexpr std::string_view kFleet = R"(
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c1}
spec: {executor: local, storage_pool: pool-a}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c2}
spec: {executor: local, storage_pool: pool-a}
---
apiVersion: cubeplane/v1
kind: User
metadata: {name: alice}
---
apiVersion: cubeplane/v1
kind: User
metadata: {name: mallory}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100, grace: 7s}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1, c2]
  quota:
    gpu/a100: {guaranteed: 4}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pa}
spec:
  members: [{user: alice, role: member}]
  default_resource_group: rg-a
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pb}
spec:
  members: [{user: mallory, role: admin}]
  default_resource_group: rg-a
)";

constexpr Millis kHour = 3'600'000;
constexpr Millis kDay = 24 * kHour;
constexpr Millis kJan1 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

inline std::string pipeline_yaml(const std::string& pg, int gpus, const std::string& extra = "") {
  return "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: " + pg +
         "}\nspec:\n  priority: batch\n  steps:\n    - name: train\n      command: [\"true\"]\n"
         "      resources: {cpu: \"1\", gpu: " +
         std::to_string(gpus) + ", gpu_type: a100}\n" + extra;
}

inline NodeReport gpu_node(const std::string& name, int gpus) {
  NodeReport n;
  n.name = name;
  n.labels = {{"gpu-type", "a100"}};
  n.capacity = Resources::parse_or_die("cpu:16,memory:64Gi,gpu/a100:" + std::to_string(gpus));
  n.allocatable = n.capacity;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(GpuDevice{i, "uuid-" + std::to_string(i), "a100", 0, 0, 0});
  return n;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cp-server-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    objects_ = std::move(open_object_store("file://" + dir_.string())).value();
    ServerConfig cfg;
    cfg.verify_warm_scheduler = true;
    cfg.lease_ttl_s = 30;
    cfg.lost_after_s = 40;
    cfg.credential_ttl_s = 3600;
    configure(cfg);
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, cfg);
    auto admin_token = cp_->ensure_admin_token();
    ASSERT_TRUE(admin_token.ok() && admin_token->has_value());
    admin_ = cp_->authenticate(**admin_token).value();
    auto fleet = parse_fleet_config(kFleet);
    ASSERT_TRUE(fleet.ok()) << fleet.error().message;
    ASSERT_TRUE(apply_fleet(*cp_, *fleet).ok());
    alice_ = user_principal("alice");
    mallory_ = user_principal("mallory");
  }
  // A test class may change the server's settings before it starts.
  virtual void configure(ServerConfig&) {}

  void TearDown() override {
    // Every cycle's kept scheduler state matched the live work (verify_warm_scheduler).
    if (cp_) {
      EXPECT_EQ(cp_->warm_check_failures(), 0);
    }
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  Principal user_principal(const std::string& name) {
    auto tok = cp_->create_token(admin_, name, json::value(nullptr));
    EXPECT_TRUE(tok.ok());
    return cp_->authenticate(std::string(tok->at("token").as_string())).value();
  }

  // Registers an agent for `cluster` and returns its principal and credential.
  std::pair<Principal, std::string> connect(const std::string& cluster) {
    auto boot = cp_->create_bootstrap_token(admin_, cluster, json::value(nullptr));
    EXPECT_TRUE(boot.ok());
    RegisterRequest req{cluster, std::string(boot->at("token").as_string()), "instance-1", "test"};
    auto reg = cp_->agent_register(req, "");
    EXPECT_TRUE(reg.ok());
    return {cp_->authenticate_agent(reg->credential).value(), reg->credential};
  }

  SyncResponse sync(const Principal& agent, std::vector<AttemptReport> attempts, int gpus = 8) {
    SyncRequest req;
    req.cluster_id = agent.cluster_id;
    req.agent_instance = "instance-1";
    req.nodes = {gpu_node(agent.cluster_id + "-n1", gpus)};
    req.attempts = std::move(attempts);
    auto r = cp_->agent_sync(agent, req);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : SyncResponse{};
  }

  std::vector<std::string> submit(const Principal& p, const std::string& yaml) {
    auto doc = parse_document(yaml);
    EXPECT_TRUE(doc.ok());
    auto r = cp_->submit_pipeline(p, *doc);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    std::vector<std::string> ids;
    if (r.ok()) {
      for (const auto& t : r->at("tasks").as_array()) ids.emplace_back(t.at("id").as_string());
    }
    return ids;
  }

  // On c1 with the group's 4 A100s: a task of 3 placed, then one of 2 left
  // waiting on quota, each submitted and given a cycle (the clock a second
  // on before the second): {placed, waiting}.
  std::pair<std::string, std::string> one_waiting_on_quota() {
    auto [agent, cred] = connect("c1");
    sync(agent, {});
    auto first = submit(alice_, pipeline_yaml("pa", 3));
    EXPECT_TRUE(cp_->schedule_once().ok());
    auto second = submit(alice_, pipeline_yaml("pa", 2));
    clock_.advance_ms(1000);
    EXPECT_TRUE(cp_->schedule_once().ok());
    if (first.size() != 1 || second.size() != 1) {
      ADD_FAILURE() << "expected one task per pipeline";
      return {};
    }
    return {first[0], second[0]};
  }

  // More of the fleet: clusters, users and documents in `yaml`.
  void add_to_fleet(std::string_view yaml) {
    auto fleet = parse_fleet_config(yaml);
    ASSERT_TRUE(fleet.ok()) << fleet.error().message;
    ASSERT_TRUE(apply_fleet(*cp_, *fleet).ok());
  }

  // A task of one GPU (`extra` added to its step) placed on `agent`'s
  // cluster, which reports its nodes first (so the only one with nodes yet),
  // and reported Running there.
  struct Running {
    std::string task_id;
    StartOrder order;
  };
  Running running_on(const Principal& agent, const std::string& extra = "") {
    sync(agent, {});
    auto ids = submit(alice_, pipeline_yaml("pa", 1, extra));
    EXPECT_EQ(ids.size(), 1u);
    EXPECT_TRUE(cp_->schedule_once().ok());
    auto start = sync(agent, {}).start;
    EXPECT_EQ(start.size(), 1u);
    Running r{ids.empty() ? "" : ids[0], start.empty() ? StartOrder{} : start[0]};
    sync(agent, {AttemptReport{r.order.attempt_id, r.order.epoch, AttemptState::Running, std::nullopt,
                               clock_.now_ms(), 0, ""}});
    return r;
  }

  // rg-a's A100 guarantee set to `n` (the fleet applied again with it).
  void guarantee_a100s(int n) {
    std::string fleet(kFleet);
    const std::string four = "gpu/a100: {guaranteed: 4}";
    ASSERT_NE(fleet.find(four), std::string::npos);
    fleet.replace(fleet.find(four), four.size(), "gpu/a100: {guaranteed: " + std::to_string(n) + "}");
    ASSERT_TRUE(apply_fleet(*cp_, parse_fleet_config(fleet).value()).ok());
  }

  Task task(const std::string& id) {
    auto j = cp_->get_task(admin_, id);
    EXPECT_TRUE(j.ok());
    Task t;
    json::object o = *j;
    o.erase("attempts");
    EXPECT_TRUE(from_json(json::value(o), t).ok());
    return t;
  }

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Principal admin_, alice_, mallory_;
};

}  // namespace cp::testing
