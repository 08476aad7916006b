// A silent cluster whose jobs the agent does not supervise itself (Slurm,
// Kubernetes: server/unknown_attempts.h): its attempts become Unknown and
// are never rerun behind its back; the agent coming back, or a platform
// admin's confirm-lost, decides. This file adds cs, a Slurm cluster in the
// fixture's pool-a, to rg-a beside the local c1 and c2.
#include <algorithm>

#include "control_plane_fixture.h"

namespace cp::testing {
namespace {

constexpr std::string_view kSlurmCluster = R"(
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: cs}
spec: {executor: slurm, storage_pool: pool-a}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1, c2, cs]
  quota:
    gpu/a100: {guaranteed: 4}
)";

class UnknownAttemptsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    ControlPlaneTest::SetUp();
    add_to_fleet(kSlurmCluster);
    as_ = connect("cs").first;
    a1_ = connect("c1").first;
    a2_ = connect("c2").first;
  }

  // A task running on `agent`'s cluster, and c2 idle beside it (its nodes reported).
  Running running_with_c2_idle(const Principal& agent) {
    Running r = running_on(agent);
    sync(a2_, {});
    return r;
  }

  AttemptReport report(const Running& r, AttemptState state) {
    const bool ended = is_terminal(state);
    return AttemptReport{r.order.attempt_id, r.order.epoch, state, ended ? std::optional<int>(0) : std::nullopt,
                         clock_.now_ms(), ended ? clock_.now_ms() : 0, ended ? "done" : ""};
  }

  // `silent`'s agent says nothing past lost_after; c2 keeps syncing.
  void fall_silent(const std::string& silent) {
    clock_.advance_ms(41'000);
    sync(a2_, {});
    ASSERT_TRUE(cp_->check_liveness().ok());
    ASSERT_EQ(cp_->get_cluster(admin_, silent)->state, ClusterState::offline);
  }

  std::vector<Attempt> attempts(const std::string& task_id) {
    auto j = cp_->get_task(admin_, task_id);
    EXPECT_TRUE(j.ok());
    std::vector<Attempt> out;
    EXPECT_TRUE(from_json(j->at("attempts"), out).ok());
    return out;
  }

  std::vector<Event> events_of(const std::string& kind, const std::string& id) {
    EventQuery q;
    q.object_kind = kind;
    q.object_id = id;
    q.limit = 1000;
    auto events = cp_->list_events(admin_, q);
    EXPECT_TRUE(events.ok());
    return events.ok() ? *events : std::vector<Event>{};
  }

  Principal as_, a1_, a2_;
};

// An agent whose credential expired has its syncs refused: the cluster is
// offline (credential_expired) at the first refusal, and past lost_after its
// attempts are judged as any silent cluster's: Lost and requeued on a local
// cluster, Unknown on Slurm. Before, such a cluster was skipped for good and
// its tasks stayed Running on it forever.
TEST_F(UnknownAttemptsTest, AClusterWhoseCredentialExpiredIsJudgedAsAnySilentOne) {
  auto [local_agent, local_cred] = connect("c1");
  auto [slurm_agent, slurm_cred] = connect("cs");
  Running on_local = running_on(local_agent, "  cluster: c1\n");
  Running on_slurm = running_on(slurm_agent, "  cluster: cs\n");
  clock_.advance_ms(3601'000);  // past the credential's life and lost_after
  ASSERT_FALSE(cp_->authenticate_agent(local_cred).ok());
  ASSERT_FALSE(cp_->authenticate_agent(slurm_cred).ok());
  sync(a2_, {});
  ASSERT_TRUE(cp_->check_liveness().ok());
  for (const auto& id : {"c1", "cs"}) {
    auto c = cp_->get_cluster(admin_, id);
    EXPECT_EQ(c->state, ClusterState::offline) << id;
    EXPECT_EQ(c->state_reason, "credential_expired") << id;
  }
  EXPECT_EQ(attempts(on_local.task_id).at(0).state, AttemptState::Lost);
  EXPECT_EQ(cp_->get_task(admin_, on_local.task_id)->at("state").as_string(), "Queued");
  EXPECT_EQ(attempts(on_slurm.task_id).at(0).state, AttemptState::Unknown);
  ASSERT_TRUE(cp_->check_liveness().ok());  // a second pass changes nothing
  EXPECT_EQ(attempts(on_local.task_id).size(), 1u);
  EXPECT_EQ(attempts(on_slurm.task_id).at(0).state, AttemptState::Unknown);
}

TEST_F(UnknownAttemptsTest, ASilentSlurmClustersAttemptIsUnknownAndNeverRerun) {
  // Its job may still run under slurmd: the attempt is Unknown, the task keeps it and says why, and no cycle
  // places it again, however many run while c2 stands idle beside it.
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto as = attempts(r.task_id);
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].state, AttemptState::Unknown);
  EXPECT_EQ(as[0].finished_at, 0);
  EXPECT_NE(as[0].message.find("whether attempt 1 still runs is unknown"), std::string::npos) << as[0].message;
  EXPECT_NE(as[0].message.find("cubeplane clusters confirm-lost cs"), std::string::npos) << as[0].message;
  Task t = task(r.task_id);
  EXPECT_EQ(t.state, TaskState::Running);
  EXPECT_EQ(t.current_attempt, r.order.attempt_id);
  ASSERT_EQ(t.reasons.size(), 1u);
  EXPECT_EQ(t.reasons[0].code, "attempt_unknown");
  EXPECT_NE(t.reasons[0].message.find("not rerun"), std::string::npos) << t.reasons[0].message;
  EXPECT_NE(t.reasons[0].message_zh.find("不会重新运行"), std::string::npos) << t.reasons[0].message_zh;
  auto explain = cp_->explain_task(alice_, r.task_id);
  ASSERT_TRUE(explain.ok());
  EXPECT_NE(std::string(explain->at("summary").as_string()).find("may still run"), std::string::npos);

  for (int i = 0; i < 3; ++i) {
    clock_.advance_ms(5'000);
    EXPECT_TRUE(sync(a2_, {}).start.empty());
    ASSERT_TRUE(cp_->schedule_once().ok());
    ASSERT_TRUE(cp_->check_liveness().ok());
  }
  EXPECT_TRUE(sync(a2_, {}).start.empty());
  EXPECT_EQ(attempts(r.task_id).size(), 1u);
  EXPECT_EQ(task(r.task_id).state, TaskState::Running);
  // One event for the change, not one a pass.
  auto ev = events_of("attempt", r.order.attempt_id);
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(), [](const Event& e) { return e.to == "Unknown"; }), 1);
}

TEST_F(UnknownAttemptsTest, AnUnknownAttemptStillHoldsItsQuota) {
  // rg-a guarantees 4 GPUs; the Unknown attempt's one is still counted, so a task of 4 waits on quota.
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto ids = submit(alice_, pipeline_yaml("pa", 4));
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task waiting = task(ids.at(0));
  EXPECT_EQ(waiting.state, TaskState::Queued);
  ASSERT_FALSE(waiting.reasons.empty());
  EXPECT_EQ(waiting.reasons[0].code, "quota_exceeded");
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Unknown);
}

TEST_F(UnknownAttemptsTest, ASilentLocalClustersAttemptIsStillLostAndRequeued) {
  // The local executor's shims stop their tasks when the lease runs out: Lost, and rerun in the pool at once.
  auto r = running_with_c2_idle(a1_);
  fall_silent("c1");
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Lost);
  Task queued = task(r.task_id);
  EXPECT_EQ(queued.state, TaskState::Queued);
  ASSERT_FALSE(queued.reasons.empty());
  EXPECT_EQ(queued.reasons[0].code, "requeued_after_loss");
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(r.task_id).assigned_cluster, "c2");
  EXPECT_EQ(attempts(r.task_id).size(), 2u);
}

TEST_F(UnknownAttemptsTest, ItsAgentBackReportingItRunningMakesItRunningAgain) {
  // No rerun happened, so the agent's report is taken: Running again, not superseded, the reason gone.
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto back = sync(as_, {report(r, AttemptState::Running)});
  EXPECT_TRUE(back.stop.empty());
  EXPECT_TRUE(back.start.empty());
  EXPECT_EQ(cp_->get_cluster(admin_, "cs")->state, ClusterState::online);
  auto as = attempts(r.task_id);
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].state, AttemptState::Running);
  EXPECT_EQ(as[0].message, "");
  Task t = task(r.task_id);
  EXPECT_EQ(t.state, TaskState::Running);
  EXPECT_TRUE(t.reasons.empty());
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(attempts(r.task_id).size(), 1u);
}

TEST_F(UnknownAttemptsTest, ItsAgentBackReportingItSucceededEndsTheTask) {
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto back = sync(as_, {report(r, AttemptState::Succeeded)});
  EXPECT_TRUE(back.stop.empty());
  EXPECT_EQ(back.ack, std::vector<std::string>{r.order.attempt_id});
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Succeeded);
  EXPECT_EQ(task(r.task_id).state, TaskState::Succeeded);
}

TEST_F(UnknownAttemptsTest, ItsAgentBackReportingItLostRequeuesItInThePool) {
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  sync(as_, {report(r, AttemptState::Lost)});
  Task queued = task(r.task_id);
  EXPECT_EQ(queued.state, TaskState::Queued);
  EXPECT_EQ(queued.storage_pool, "pool-a");
}

TEST_F(UnknownAttemptsTest, ItsAgentBackNotMentioningItLeavesItUnknown) {
  // The agent may have lost its journal while the job runs on: nothing to start, nothing decided.
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto back = sync(as_, {});
  EXPECT_TRUE(back.start.empty());
  EXPECT_TRUE(back.stop.empty());
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Unknown);
  EXPECT_EQ(task(r.task_id).reasons.at(0).code, "attempt_unknown");
  // Online, its agent reports its attempts itself: confirm-lost is refused.
  auto refused = cp_->confirm_lost(admin_, "cs");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 409);
}

TEST_F(UnknownAttemptsTest, ConfirmLostRequeuesInTheStoragePoolOnceAndASecondConfirmChangesNothing) {
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto confirmed = cp_->confirm_lost(admin_, "cs");
  ASSERT_TRUE(confirmed.ok()) << confirmed.error().message;
  auto& list = confirmed->at("confirmed").as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("attempt"), r.order.attempt_id.c_str());
  EXPECT_EQ(list[0].at("requeued"), true);
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Lost);
  Task queued = task(r.task_id);
  EXPECT_EQ(queued.state, TaskState::Queued);
  EXPECT_EQ(queued.storage_pool, "pool-a");
  EXPECT_EQ(queued.reasons.at(0).code, "requeued_after_loss");
  // The confirmation is the admin's, in the attempt's history.
  auto ev = events_of("attempt", r.order.attempt_id);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().to, "Lost");
  EXPECT_EQ(ev.back().actor, admin_.user);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(r.task_id).assigned_cluster, "c2");
  EXPECT_EQ(attempts(r.task_id).size(), 2u);

  const auto before = events_of("attempt", r.order.attempt_id).size();
  auto again = cp_->confirm_lost(admin_, "cs");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->at("confirmed").as_array().empty());
  EXPECT_NE(std::string(again->at("message").as_string()).find("nothing confirmed"), std::string::npos);
  EXPECT_EQ(events_of("attempt", r.order.attempt_id).size(), before);
  EXPECT_EQ(task(r.task_id).assigned_cluster, "c2");
  EXPECT_EQ(attempts(r.task_id).size(), 2u);
}

TEST_F(UnknownAttemptsTest, ConfirmLostRefusesAndChangesNothing) {
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  auto by_member = cp_->confirm_lost(alice_, "cs");
  ASSERT_FALSE(by_member.ok());
  EXPECT_EQ(by_member.error().status, 403);
  auto unknown_cluster = cp_->confirm_lost(admin_, "nope");
  ASSERT_FALSE(unknown_cluster.ok());
  EXPECT_EQ(unknown_cluster.error().status, 404);
  auto online = cp_->confirm_lost(admin_, "c2");
  ASSERT_FALSE(online.ok());
  EXPECT_EQ(online.error().status, 409);
  EXPECT_EQ(online.error().code, "cluster_not_offline");
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Unknown);
  EXPECT_EQ(task(r.task_id).state, TaskState::Running);
}

TEST_F(UnknownAttemptsTest, ACancelWhileUnknownStopsItWhenItsAgentIsBack) {
  // Nothing can reach it while its cluster is silent: it stays Unknown, and is told to stop once reported.
  auto r = running_with_c2_idle(as_);
  fall_silent("cs");
  ASSERT_TRUE(cp_->cancel_task(alice_, r.task_id).ok());
  auto a = attempts(r.task_id).at(0);
  EXPECT_EQ(a.state, AttemptState::Unknown);
  EXPECT_EQ(a.stop_reason, "cancel");
  auto back = sync(as_, {report(r, AttemptState::Running)});
  ASSERT_EQ(back.stop.size(), 1u);
  EXPECT_EQ(back.stop[0].reason, "cancel");
  EXPECT_EQ(attempts(r.task_id).at(0).state, AttemptState::Stopping);
  sync(as_, {report(r, AttemptState::Cancelled)});
  EXPECT_EQ(task(r.task_id).state, TaskState::Cancelled);
}

TEST_F(UnknownAttemptsTest, TheOfflineAlertSaysHowManyAreUnknownAndWhatToDo) {
  running_with_c2_idle(as_);
  fall_silent("cs");
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto page = cp_->list_alerts(admin_, AlertQuery{});
  ASSERT_TRUE(page.ok());
  auto it = std::find_if(page->items.begin(), page->items.end(), [](const Alert& a) {
    return a.rule == "cluster_offline" && a.labels.at("cluster") == "cs";
  });
  ASSERT_NE(it, page->items.end());
  EXPECT_NE(it->summary.find("1 attempt(s) Unknown"), std::string::npos) << it->summary;
  EXPECT_NE(it->summary.find("squeue"), std::string::npos) << it->summary;
  EXPECT_NE(it->summary.find("cubeplane clusters confirm-lost cs"), std::string::npos) << it->summary;
  EXPECT_NE(it->summary_zh.find("状态未知"), std::string::npos) << it->summary_zh;
  EXPECT_EQ(cp_->unknown_attempt_counts({"cs", "c1"})->at("cs"), 1);
}

}  // namespace
}  // namespace cp::testing
