// The server side of preemption and of re-checking a plan at apply time:
// ControlPlane over SQLite in memory with a simulated clock and a fake agent
// that syncs by hand. One property per test, stated in its first comment.
//
// The fleet: one cluster with one node of 2 GPUs (4 where a test says so), a
// group whose quota is those 2 GPUs, classes batch (preemptible, grace 5 s)
// and urgent (may preempt at once, not preemptible, grace 9 s).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "model/documents.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "forwarding_store.h"
#include "store/store.h"

namespace cp {
namespace {

constexpr std::string_view kFleet = R"(
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c1}
spec: {executor: local, storage_pool: pool-a}
---
apiVersion: cubeplane/v1
kind: User
metadata: {name: alice}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100, preemptible: true, may_preempt: false, grace: 5s}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: urgent}
spec: {value: 1000, preemptible: false, may_preempt: true, preempt_after: 0s, grace: 9s}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1]
  quota:
    gpu/a100: {guaranteed: 2}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pa}
spec:
  members: [{user: alice, role: member}]
  default_resource_group: rg-a
)";

std::string pipeline(const std::string& priority, int gpus, bool checkpoint = false) {
  return "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\nspec:\n  priority: " +
         priority + "\n  steps:\n    - name: work\n      command: [\"true\"]\n" +
         (checkpoint ? "      checkpoint: true\n" : "") + "      resources: {cpu: \"1\", gpu: " +
         std::to_string(gpus) + ", gpu_type: a100}\n";
}

NodeReport gpu_node(const std::string& name, int gpus) {
  NodeReport n;
  n.name = name;
  n.labels = {{"gpu-type", "a100"}};
  n.capacity = Resources::parse_or_die("cpu:16,memory:64Gi" + (gpus > 0 ? ",gpu/a100:" + std::to_string(gpus)
                                                                          : std::string()));
  n.allocatable = n.capacity;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(GpuDevice{i, "uuid-" + std::to_string(i), "a100", 0, 0, 0});
  return n;
}

// Fault injection as a decorator (STYLE.md): runs `hook` once, right before
// the next write transaction. schedule_once() reads its snapshot, decides,
// then writes: a hook armed before it runs between the snapshot and the apply.
class BetweenSnapshotAndApply final : public testing::ForwardingStore {
 public:
  explicit BetweenSnapshotAndApply(Store& inner) : ForwardingStore(inner) {}
  void arm(std::function<void()> hook) { hook_ = std::move(hook); }

  Status write(const std::function<Status(Tx&)>& body) override {
    if (hook_) {
      auto hook = std::move(hook_);
      hook_ = nullptr;
      hook();
    }
    return inner_.write(body);
  }

 private:
  std::function<void()> hook_;
};

class PreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cp-preempt-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    inner_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(inner_->migrate().ok());
    store_ = std::make_unique<BetweenSnapshotAndApply>(*inner_);
    objects_ = std::move(open_object_store("file://" + dir_.string())).value();
    ServerConfig cfg;
    cfg.verify_warm_scheduler = true;
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, cfg);
    auto admin_token = cp_->ensure_admin_token();
    ASSERT_TRUE(admin_token.ok() && admin_token->has_value());
    admin_ = cp_->authenticate(**admin_token).value();
    auto fleet = parse_fleet_config(kFleet);
    ASSERT_TRUE(fleet.ok()) << fleet.error().message;
    ASSERT_TRUE(apply_fleet(*cp_, *fleet).ok());
    auto tok = cp_->create_token(admin_, "alice", json::value(nullptr));
    ASSERT_TRUE(tok.ok());
    alice_ = cp_->authenticate(std::string(tok->at("token").as_string())).value();
    auto boot = cp_->create_bootstrap_token(admin_, "c1", json::value(nullptr));
    ASSERT_TRUE(boot.ok());
    auto reg = cp_->agent_register(RegisterRequest{"c1", std::string(boot->at("token").as_string()), "i-1", "t"}, "");
    ASSERT_TRUE(reg.ok());
    agent_ = cp_->authenticate_agent(reg->credential).value();
    sync({});
  }
  void TearDown() override {
    if (cp_) {
      EXPECT_EQ(cp_->warm_check_failures(), 0);
    }
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  SyncResponse sync(std::vector<AttemptReport> attempts) {
    SyncRequest req;
    req.cluster_id = "c1";
    req.agent_instance = "i-1";
    req.nodes = {gpu_node("n1", gpus_)};
    req.attempts = std::move(attempts);
    auto r = cp_->agent_sync(agent_, req);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : SyncResponse{};
  }

  std::string submit(const std::string& yaml) {
    auto doc = parse_document(yaml);
    EXPECT_TRUE(doc.ok());
    auto r = cp_->submit_pipeline(alice_, *doc);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::string(r->at("tasks").as_array().at(0).at("id").as_string()) : std::string();
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

  std::vector<Attempt> attempts(const std::string& id) {
    auto j = cp_->get_task(admin_, id);
    EXPECT_TRUE(j.ok());
    std::vector<Attempt> out;
    EXPECT_TRUE(from_json(j->at("attempts"), out).ok());
    return out;
  }

  std::vector<Event> events(const std::string& kind, const std::string& id) {
    auto r = cp_->list_events(admin_, EventQuery{kind, id, 0, 100});
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<Event>{};
  }

  static bool has_reason(const Task& t, std::string_view code) {
    for (const auto& r : t.reasons) {
      if (r.code == code) return true;
    }
    return false;
  }

  AttemptReport report(const StartOrder& o, AttemptState state, std::optional<int> exit_code = std::nullopt,
                       std::string message = "") {
    bool ended = state != AttemptState::Running && state != AttemptState::Stopping;
    return AttemptReport{o.attempt_id, o.epoch, state, exit_code, started_at_, ended ? clock_.now_ms() : 0,
                         std::move(message)};
  }

  // A batch task with a checkpoint holding both GPUs of n1, Running.
  StartOrder run_batch(std::string& id) {
    id = submit(pipeline("batch", 2, true));
    EXPECT_TRUE(cp_->schedule_once().ok());
    auto resp = sync({});
    EXPECT_EQ(resp.start.size(), 1u);
    if (resp.start.empty()) return {};
    StartOrder o = resp.start[0];
    started_at_ = clock_.now_ms();
    sync({report(o, AttemptState::Running)});
    EXPECT_EQ(task(id).state, TaskState::Running);
    clock_.advance_ms(60'000);
    return o;
  }

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> inner_;
  std::unique_ptr<BetweenSnapshotAndApply> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Principal admin_, alice_, agent_;
  int gpus_ = 2;
  Millis started_at_ = 0;
};

TEST_F(PreemptionTest, APreemptionStopsTheVictimWithItsClassGrace) {
  // A preemption in the plan marks the victim attempt Stopping (preempt) and its task Preempting; the next
  // sync of its cluster carries a stop order with reason preempt and the batch class's grace.
  std::string batch;
  StartOrder victim = run_batch(batch);
  std::string urgent = submit(pipeline("urgent", 2));
  ASSERT_TRUE(cp_->schedule_once().ok());

  auto held = attempts(batch);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].state, AttemptState::Stopping);
  EXPECT_EQ(held[0].stop_reason, "preempt");
  EXPECT_NE(held[0].message.find(urgent), std::string::npos) << held[0].message;
  EXPECT_EQ(task(batch).state, TaskState::Preempting);
  Task waiting = task(urgent);
  EXPECT_EQ(waiting.state, TaskState::Queued);
  EXPECT_TRUE(has_reason(waiting, "waiting_for_preemption"));

  // The victim's transition names its preemptor and the kind; the preemptor's event names its victims.
  bool found = false;
  for (const auto& e : events("task", batch)) {
    if (e.type != "task.state" || e.to != "Preempting") continue;
    found = true;
    EXPECT_EQ(std::string(e.data.at("preemptor").as_string()), urgent);
    EXPECT_EQ(std::string(e.data.at("kind").as_string()), "priority");
    EXPECT_EQ(std::string(e.data.at("attempt").as_string()), victim.attempt_id);
  }
  EXPECT_TRUE(found);
  found = false;
  for (const auto& e : events("task", urgent)) {
    if (e.type != "task.preempting_for") continue;
    found = true;
    ASSERT_EQ(e.data.at("victims").as_array().size(), 1u);
    EXPECT_EQ(std::string(e.data.at("victims").as_array()[0].at("task").as_string()), batch);
  }
  EXPECT_TRUE(found);

  auto resp = sync({report(victim, AttemptState::Running)});
  ASSERT_EQ(resp.stop.size(), 1u);
  EXPECT_EQ(resp.stop[0].attempt_id, victim.attempt_id);
  EXPECT_EQ(resp.stop[0].reason, "preempt");
  EXPECT_EQ(resp.stop[0].grace_s, 5);
  EXPECT_TRUE(resp.start.empty());

  // A second cycle does not preempt it again, nor anything else.
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(attempts(batch).size(), 1u);
  int preempting_for = 0;
  for (const auto& e : events("task", urgent)) preempting_for += e.type == "task.preempting_for";
  EXPECT_EQ(preempting_for, 1);
}

TEST_F(PreemptionTest, APreemptedTaskIsRequeuedAndResumesAsAttemptTwo) {
  // The agent reporting Preempted requeues the victim (queued_at renewed, attempts kept); the preemptor runs
  // in the room freed, and after it the victim gets attempt number 2 (epoch 2) with its checkpoint.
  std::string batch;
  StartOrder victim = run_batch(batch);
  Millis first_queued = task(batch).queued_at;
  std::string urgent = submit(pipeline("urgent", 2));
  ASSERT_TRUE(cp_->schedule_once().ok());
  ASSERT_EQ(task(batch).state, TaskState::Preempting);

  clock_.advance_ms(3000);
  auto ack = sync({report(victim, AttemptState::Preempted, 143, "preempted")});
  ASSERT_EQ(ack.ack.size(), 1u);
  Task requeued = task(batch);
  EXPECT_EQ(requeued.state, TaskState::Queued);
  // (get_task's "attempts" is the list, which hides the count: the count shows in the next attempt's number.)
  EXPECT_EQ(attempts(batch).size(), 1u);
  EXPECT_GT(requeued.queued_at, first_queued);
  EXPECT_TRUE(has_reason(requeued, "requeued_after_preemption"));
  auto first = attempts(batch).at(0);
  EXPECT_EQ(first.state, AttemptState::Preempted);
  EXPECT_EQ(first.stop_reason, "preempt");
  EXPECT_NE(first.message.find(urgent), std::string::npos) << first.message;

  // The preemptor goes first; the victim waits for the room.
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(urgent).state, TaskState::Dispatched);
  EXPECT_EQ(task(batch).state, TaskState::Queued);
  auto resp = sync({});
  ASSERT_EQ(resp.start.size(), 1u);
  StartOrder u = resp.start[0];
  EXPECT_EQ(u.task_id, urgent);
  started_at_ = clock_.now_ms();
  sync({report(u, AttemptState::Running)});
  clock_.advance_ms(1000);
  sync({report(u, AttemptState::Succeeded, 0)});
  EXPECT_EQ(task(urgent).state, TaskState::Succeeded);

  ASSERT_TRUE(cp_->schedule_once().ok());
  resp = sync({});
  ASSERT_EQ(resp.start.size(), 1u);
  const StartOrder& again = resp.start[0];
  EXPECT_EQ(again.task_id, batch);
  EXPECT_EQ(again.attempt_number, 2);
  EXPECT_EQ(again.epoch, 2);
  EXPECT_EQ(again.attempt_id, batch + ".2");
  EXPECT_EQ(again.checkpoint_key, "checkpoints/" + batch + "/");
  started_at_ = clock_.now_ms();
  sync({report(again, AttemptState::Running)});
  sync({report(again, AttemptState::Succeeded, 0)});
  EXPECT_EQ(task(batch).state, TaskState::Succeeded);
  EXPECT_EQ(attempts(batch).size(), 2u);
}

TEST_F(PreemptionTest, AVictimThatEndsOnItsOwnDuringItsGraceEndsNormally) {
  // A preempted attempt that reports Succeeded (or Failed) during its grace ends its task that way.
  std::string batch;
  StartOrder victim = run_batch(batch);
  submit(pipeline("urgent", 2));
  ASSERT_TRUE(cp_->schedule_once().ok());
  ASSERT_EQ(task(batch).state, TaskState::Preempting);
  sync({report(victim, AttemptState::Succeeded, 0)});
  EXPECT_EQ(task(batch).state, TaskState::Succeeded);
  EXPECT_EQ(attempts(batch).at(0).state, AttemptState::Succeeded);
}

TEST_F(PreemptionTest, AStalePreemptionIsSkipped) {
  // A preemption whose victim finished between the snapshot and the apply changes nothing: no Stopping, no
  // Preempting, no preempting_for event; the preemptor is placed by the next cycle.
  std::string batch;
  StartOrder victim = run_batch(batch);
  std::string urgent = submit(pipeline("urgent", 2));
  store_->arm([&] { sync({report(victim, AttemptState::Succeeded, 0)}); });
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(batch).state, TaskState::Succeeded);
  auto held = attempts(batch);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].state, AttemptState::Succeeded);
  EXPECT_TRUE(held[0].stop_reason.empty());
  for (const auto& e : events("task", urgent)) EXPECT_NE(e.type, "task.preempting_for");
  for (const auto& e : events("task", batch)) EXPECT_NE(e.to, "Preempting");
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(urgent).state, TaskState::Dispatched);
}

TEST_F(PreemptionTest, APlacementOverQuotaAtApplyTimeIsDropped) {
  // Usage that grows between the snapshot and the apply (here an attempt written behind the scheduler's back
  // on the other 2 GPUs of a 4-GPU node) makes the apply drop a placement that would exceed the quota.
  gpus_ = 4;
  sync({});
  std::string id = submit(pipeline("batch", 2));
  store_->arm([&] {
    Status st = inner_->write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto t, tx.get_task(id));
      Task other = *t;
      other.id = "t-behind-the-back";
      other.state = TaskState::Running;
      other.current_attempt = other.id + ".1";
      other.attempts = 1;
      CP_TRY(tx.insert_task(other));
      Attempt a;
      a.id = other.current_attempt;
      a.task_id = other.id;
      a.epoch = 1;
      a.cluster_id = "c1";
      a.placements = {ReplicaPlacement{0, "n1", {2, 3}}};
      a.resources = Resources::parse_or_die("cpu:1,gpu/a100:2");
      a.state = AttemptState::Running;
      return tx.insert_attempt(a);
    });
    ASSERT_TRUE(st.ok()) << st.error().message;
  });
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task t = task(id);
  EXPECT_EQ(t.state, TaskState::Queued);
  EXPECT_TRUE(attempts(id).empty());
  // The next cycle sees the usage and says why.
  ASSERT_TRUE(cp_->schedule_once().ok());
  t = task(id);
  EXPECT_EQ(t.state, TaskState::Queued);
  EXPECT_TRUE(has_reason(t, "quota_exceeded"));
}

TEST_F(PreemptionTest, APlacementOnANodeThatShrankIsDropped) {
  // A node that reports fewer GPUs between the snapshot and the apply is not over-committed.
  std::string id = submit(pipeline("batch", 2));
  store_->arm([&] {
    gpus_ = 1;
    sync({});
  });
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(id).state, TaskState::Queued);
  EXPECT_TRUE(attempts(id).empty());
}

TEST_F(PreemptionTest, ADispatchedPlacementRecordsItsShapeAndBorrowing) {
  // The Dispatched event carries the shape used (0: the step's own) and whether it borrows.
  std::string id = submit(pipeline("batch", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  bool found = false;
  for (const auto& e : events("task", id)) {
    if (e.type != "task.state" || e.to != "Dispatched") continue;
    found = true;
    EXPECT_EQ(e.data.at("shape").as_int64(), 0);
    EXPECT_FALSE(e.data.at("borrowing").as_bool());
  }
  EXPECT_TRUE(found);
}

TEST_F(PreemptionTest, AStopForAnAttemptTheAgentNeverStartedEndsIt) {
  // An attempt told to stop before its agent ever had it (no start order can reach it any more) ends at the
  // next sync that does not report it: here a cancel of a Dispatched task, whose start was never fetched.
  std::string id = submit(pipeline("batch", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  ASSERT_EQ(task(id).state, TaskState::Dispatched);
  ASSERT_TRUE(cp_->cancel_task(alice_, id).ok());
  auto resp = sync({});
  EXPECT_TRUE(resp.start.empty());
  EXPECT_EQ(task(id).state, TaskState::Cancelled);
  EXPECT_EQ(attempts(id).at(0).state, AttemptState::Cancelled);
}

TEST_F(PreemptionTest, AStopReportedByTheAgentIsNotEndedByTheServer) {
  // An attempt told to stop that the agent reports (it did start it) is left to the agent: stop order, no end.
  std::string id = submit(pipeline("batch", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  StartOrder o = sync({}).start.at(0);
  ASSERT_TRUE(cp_->cancel_task(alice_, id).ok());
  started_at_ = clock_.now_ms();
  auto resp = sync({report(o, AttemptState::Running)});
  ASSERT_EQ(resp.stop.size(), 1u);
  EXPECT_EQ(resp.stop[0].reason, "cancel");
  EXPECT_EQ(attempts(id).at(0).state, AttemptState::Stopping);
  // From now on it counts as started: a later sync that leaves it out does not end it either.
  sync({});
  EXPECT_EQ(attempts(id).at(0).state, AttemptState::Stopping);
}

TEST(SchedulerSettingsTest, TheServerDocumentSetsTheSchedulerKnobs) {
  // fair_share, reservations_per_group, max_victims, reasons_refresh_s and
  // reasons_refresh_per_cycle are read from the Server document, and checked.
  auto fleet = parse_fleet_config(
      "apiVersion: cubeplane/v1\nkind: Server\nspec: {fair_share: false, reservations_per_group: 0, "
      "max_victims: 3, reasons_refresh_s: 0, reasons_refresh_per_cycle: 0}\n");
  ASSERT_TRUE(fleet.ok()) << fleet.error().message;
  EXPECT_FALSE(fleet->server.control.fair_share);
  EXPECT_EQ(fleet->server.control.reservations_per_group, 0);
  EXPECT_EQ(fleet->server.control.max_victims, 3);
  EXPECT_EQ(fleet->server.control.reasons_refresh_s, 0);
  EXPECT_EQ(fleet->server.control.reasons_refresh_per_cycle, 0);
  auto defaults = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {}\n");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->server.control.fair_share);
  EXPECT_EQ(defaults->server.control.reservations_per_group, 1);
  EXPECT_EQ(defaults->server.control.max_victims, 64);
  EXPECT_EQ(defaults->server.control.reasons_refresh_s, 60);
  EXPECT_EQ(defaults->server.control.reasons_refresh_per_cycle, 10'000);
  auto bad = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {max_victims: 0}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("spec.max_victims"), std::string::npos) << bad.error().message;
  auto stale = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {reasons_refresh_s: 3601}\n");
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("spec.reasons_refresh_s"), std::string::npos) << stale.error().message;
  auto negative = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {reasons_refresh_per_cycle: -1}\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("spec.reasons_refresh_per_cycle"), std::string::npos)
      << negative.error().message;
}

}  // namespace
}  // namespace cp
