// ControlPlane over a real SQLite store and a local object store, with a
// simulated clock: the lifecycle, agent protocol, liveness and authorization
// rules of DESIGN.md, one property per test.
#include "control_plane_fixture.h"
#include "model/inventory.h"

namespace cp {
namespace {

using namespace cp::testing;

TEST_F(ControlPlaneTest, SubmittedTaskIsPlacedStartedAndSucceeds) {
  // A task goes Queued -> Dispatched -> Running -> Succeeded through one cycle and two syncs, with events.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 2));
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(ids[0]).state, TaskState::Dispatched);
  auto resp = sync(agent, {});
  ASSERT_EQ(resp.start.size(), 1u);
  const auto& order = resp.start[0];
  EXPECT_EQ(order.task_id, ids[0]);
  EXPECT_EQ(order.placements.at(0).gpu_indices.size(), 2u);
  EXPECT_EQ(order.grace_s, 7);
  // Resending the same sync is harmless: the start is repeated, nothing else changes.
  EXPECT_EQ(sync(agent, {}).start.size(), 1u);
  AttemptReport running{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, clock_.now_ms(), 0, ""};
  EXPECT_TRUE(sync(agent, {running}).start.empty());
  EXPECT_EQ(task(ids[0]).state, TaskState::Running);
  clock_.advance_ms(5000);
  AttemptReport done{order.attempt_id, order.epoch, AttemptState::Succeeded, 0, running.started_at, clock_.now_ms(),
                     ""};
  auto ack = sync(agent, {done});
  ASSERT_EQ(ack.ack.size(), 1u);
  EXPECT_EQ(task(ids[0]).state, TaskState::Succeeded);
  auto events = cp_->list_events(admin_, EventQuery{"task", ids[0], 0, 100});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 4u);  // Queued, Dispatched, Running, Succeeded
}

TEST_F(ControlPlaneTest, OverQuotaTaskStaysQueuedWithTheQuotaReason) {
  // A task that does not fit the group's quota next to running work waits with quota_exceeded.
  auto [placed, waits] = one_waiting_on_quota();
  EXPECT_EQ(task(placed).state, TaskState::Dispatched);
  Task waiting = task(waits);
  EXPECT_EQ(waiting.state, TaskState::Queued);
  ASSERT_FALSE(waiting.reasons.empty());
  EXPECT_EQ(waiting.reasons[0].code, "quota_exceeded");
  auto explain = cp_->explain_task(alice_, waits);
  ASSERT_TRUE(explain.ok());
  EXPECT_NE(std::string(explain->at("summary").as_string()).find("quota"), std::string::npos);
}

TEST_F(ControlPlaneTest, AWaitingTaskIsWrittenOnlyWhenItsReasonsChange) {
  // Every cycle explains every waiting task; the store is read and written
  // only when the explanation differs from the one kept (a long queue would
  // otherwise cost a read per waiting task per cycle).
  const std::string waiting = one_waiting_on_quota().second;
  const Task explained = task(waiting);
  ASSERT_EQ(explained.state, TaskState::Queued);
  ASSERT_FALSE(explained.reasons.empty());
  EXPECT_EQ(explained.updated_at, clock_.now_ms());
  const Millis written_at = explained.updated_at;
  const std::int64_t reads = cp_->apply_task_reads();
  const std::int64_t worded = cp_->apply_reasons_worded();
  for (int cycle = 0; cycle < 3; ++cycle) {
    clock_.advance_ms(1000);
    ASSERT_TRUE(cp_->schedule_once().ok());
  }
  const Task again = task(waiting);
  EXPECT_EQ(again.updated_at, written_at);
  EXPECT_EQ(cp_->apply_task_reads(), reads);  // the kept copy answered "unchanged"
  EXPECT_EQ(cp_->apply_reasons_worded(), worded);  // told by the figures, not worded again
  ASSERT_EQ(again.reasons.size(), explained.reasons.size());
  EXPECT_EQ(again.reasons[0].code, explained.reasons[0].code);
  EXPECT_EQ(again.reasons[0].message, explained.reasons[0].message);
}

TEST_F(ControlPlaneTest, AFallbackShapesReasonIsNotWrittenAgainAsTheTaskWaits) {
  // The reason says when each fallback shape opens, not how long to go: it
  // reads the same from cycle to cycle, so the waiting task is written once,
  // then again only when the shape opens (it is tried).
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  ASSERT_EQ(submit(alice_, pipeline_yaml("pa", 3)).size(), 1u);
  ASSERT_TRUE(cp_->schedule_once().ok());
  const auto second = submit(alice_, pipeline_yaml("pa", 2, "      fallbacks: [{after: 10m, resources: {gpu: 1}}]\n"));
  ASSERT_EQ(second.size(), 1u);
  const Millis queued_at = clock_.now_ms();
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  const Task explained = task(second[0]);
  ASSERT_EQ(explained.state, TaskState::Queued);
  ASSERT_FALSE(explained.reasons.empty());
  EXPECT_EQ(explained.reasons.back().code, "fallback_shapes");
  const std::string opens_at = format_time(queued_at + 600'000);
  EXPECT_NE(explained.reasons.back().message.find("(from " + opens_at + ")"), std::string::npos)
      << explained.reasons.back().message;
  const std::int64_t worded = cp_->apply_reasons_worded();
  for (int cycle = 0; cycle < 3; ++cycle) {
    clock_.advance_ms(60'000);
    ASSERT_TRUE(cp_->schedule_once().ok());
  }
  const Task again = task(second[0]);
  EXPECT_EQ(again.updated_at, explained.updated_at);
  EXPECT_EQ(cp_->apply_reasons_worded(), worded);
  EXPECT_EQ(again.reasons.back().message, explained.reasons.back().message);
  // Once the shape opens (one GPU, within the group's quota), the task runs on it.
  clock_.advance_ms(600'000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(second[0]).state, TaskState::Dispatched);
}

TEST_F(ControlPlaneTest, NewFiguresForTheSameWhyWaitForTheRefresh) {
  // The waiting task's quota figures move (its group's guarantee goes from 4
  // to 3 GPUs): the same why, so its stored words stand until they are
  // reasons_refresh_s (60 s) old; then they are written.
  const std::string waiting = one_waiting_on_quota().second;
  const Task explained = task(waiting);
  ASSERT_EQ(explained.reasons.at(0).code, "quota_exceeded");
  guarantee_a100s(3);
  const std::int64_t worded = cp_->apply_reasons_worded();
  for (int cycle = 0; cycle < 4; ++cycle) {
    clock_.advance_ms(14'000);
    ASSERT_TRUE(cp_->schedule_once().ok());
    const Task now = task(waiting);
    EXPECT_EQ(now.updated_at, explained.updated_at) << "cycle " << cycle;
    EXPECT_EQ(now.reasons.at(0).message, explained.reasons.at(0).message);
    const ControlPlane::CycleStats s = cp_->last_cycle();
    EXPECT_EQ(s.waiting, 1u) << "cycle " << cycle;
    EXPECT_EQ(s.reasons_written, 0) << "cycle " << cycle;
  }
  // Told by the codes alone: nothing was worded meanwhile.
  EXPECT_EQ(cp_->apply_reasons_worded(), worded);
  clock_.advance_ms(5'000);  // 61 s since the words were last the plan's
  ASSERT_TRUE(cp_->schedule_once().ok());
  const Task refreshed = task(waiting);
  EXPECT_EQ(refreshed.updated_at, clock_.now_ms());
  const ControlPlane::CycleStats s = cp_->last_cycle();
  EXPECT_EQ(s.queued, 1u);
  EXPECT_EQ(s.placed, 0u);
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.reasons_written, 1);
  EXPECT_GE(s.load_ms, 0);
  EXPECT_GE(s.apply_ms, 0);
  EXPECT_EQ(refreshed.reasons.at(0).code, "quota_exceeded");
  EXPECT_NE(refreshed.reasons.at(0).message, explained.reasons.at(0).message);
}

TEST_F(ControlPlaneTest, ALongQueuesReasonsAreWrittenAThousandTasksATransaction) {
  // 2,100 more tasks like the one waiting on quota, straight into the
  // store: their first explanation goes in transactions of 1,000 tasks
  // after the plan's (none here: nothing is placed or preempted), so that
  // no one transaction holds the store's writer for the whole queue.
  const std::string waiting = one_waiting_on_quota().second;
  const Task model = task(waiting);
  ASSERT_EQ(model.reasons.at(0).code, "quota_exceeded");
  std::vector<std::string> copies;
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
    for (int i = 0; i < 2100; ++i) {
      Task t = model;
      t.id = model.id + "-" + std::to_string(i);
      t.reasons.clear();
      CP_TRY(tx.insert_task(t));
      copies.push_back(t.id);
    }
    return {};
  }).ok());
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  ControlPlane::CycleStats s = cp_->last_cycle();
  EXPECT_EQ(s.waiting, 2101u);
  EXPECT_EQ(s.placed, 0u);
  EXPECT_EQ(s.reasons_written, 2100);
  EXPECT_EQ(s.apply_writes, 3);
  EXPECT_GT(s.longest_write_ms, 0);
  EXPECT_LE(s.longest_write_ms, s.apply_ms);
  for (const std::string& id : {copies.front(), copies[999], copies[1000], copies.back()}) {
    const Task t = task(id);
    ASSERT_FALSE(t.reasons.empty()) << id;
    std::string codes;
    for (const auto& r : t.reasons) codes += r.code + " ";
    EXPECT_NE(codes.find("quota_exceeded"), std::string::npos) << id << ": " << codes;
    EXPECT_EQ(t.updated_at, clock_.now_ms()) << id;
  }
  // Then nothing to write, and no transaction at all.
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  s = cp_->last_cycle();
  EXPECT_EQ(s.reasons_written, 0);
  EXPECT_EQ(s.apply_writes, 0);
}

class OneRefreshPerCycleTest : public ControlPlaneTest {
  void configure(ServerConfig& c) override { c.reasons_refresh_per_cycle = 1; }
};

TEST_F(OneRefreshPerCycleTest, NewFiguresPastTheRefreshAreWrittenAFewEachCycle) {
  // Two tasks wait on quota; the guarantee moves, so both have new figures
  // under the same codes. Past reasons_refresh_s, one is written a cycle:
  // the one the cycle tried first, then the other.
  const std::string first = one_waiting_on_quota().second;
  const auto second = submit(alice_, pipeline_yaml("pa", 2));
  ASSERT_EQ(second.size(), 1u);
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  const Task first_explained = task(first);
  const Task second_explained = task(second[0]);
  ASSERT_EQ(first_explained.reasons.at(0).code, "quota_exceeded");
  ASSERT_EQ(second_explained.reasons.at(0).code, "quota_exceeded");
  guarantee_a100s(3);
  clock_.advance_ms(61'000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(cp_->last_cycle().waiting, 2u);
  EXPECT_EQ(cp_->last_cycle().reasons_written, 1);
  EXPECT_EQ(task(first).updated_at, clock_.now_ms());
  EXPECT_NE(task(first).reasons.at(0).message, first_explained.reasons.at(0).message);
  EXPECT_EQ(task(second[0]).updated_at, second_explained.updated_at);
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(cp_->last_cycle().reasons_written, 1);
  EXPECT_EQ(task(second[0]).updated_at, clock_.now_ms());
  EXPECT_NE(task(second[0]).reasons.at(0).message, second_explained.reasons.at(0).message);
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(cp_->last_cycle().reasons_written, 0);
}

class NoReasonsRefreshTest : public ControlPlaneTest {
  void configure(ServerConfig& c) override { c.reasons_refresh_s = 0; }
};

TEST_F(NoReasonsRefreshTest, NewFiguresAreWrittenAtTheNextCycle) {
  const std::string waiting = one_waiting_on_quota().second;
  const Task explained = task(waiting);
  guarantee_a100s(3);
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  const Task now = task(waiting);
  EXPECT_EQ(now.updated_at, clock_.now_ms());
  EXPECT_EQ(now.reasons.at(0).code, "quota_exceeded");
  EXPECT_NE(now.reasons.at(0).message, explained.reasons.at(0).message);
}

TEST_F(ControlPlaneTest, ReasonsWrittenBehindTheSchedulersBackAreWrittenAgain) {
  // The apply tells an unchanged explanation by its figures only while the
  // stored words are the ones it left: words another writer put there (same
  // code, other message) are replaced at the next cycle.
  const std::string waiting = one_waiting_on_quota().second;
  const Task explained = task(waiting);
  ASSERT_FALSE(explained.reasons.empty());
  ASSERT_EQ(explained.reasons[0].code, "quota_exceeded");
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task(waiting));
    Task changed = std::move(*t);
    changed.reasons.at(0).message = "written elsewhere";
    return tx.update_task(changed);
  }).ok());
  ASSERT_EQ(task(waiting).reasons[0].message, "written elsewhere");
  const std::int64_t worded = cp_->apply_reasons_worded();
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(task(waiting).reasons[0].message, explained.reasons[0].message);
  EXPECT_EQ(cp_->apply_reasons_worded(), worded + 1);
  // Then unchanged again: told by the figures.
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->schedule_once().ok());
  EXPECT_EQ(cp_->apply_reasons_worded(), worded + 1);
}

TEST_F(ControlPlaneTest, CancellingARunningTaskSendsAStopWithTheClassGrace) {
  // Cancel marks the attempt Stopping; the agent is told to stop it; its report ends the task Cancelled.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto order = sync(agent, {}).start.at(0);
  AttemptReport running{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, clock_.now_ms(), 0, ""};
  sync(agent, {running});
  auto cancelled = cp_->cancel_task(alice_, ids[0]);
  ASSERT_TRUE(cancelled.ok());
  auto resp = sync(agent, {running});
  ASSERT_EQ(resp.stop.size(), 1u);
  EXPECT_EQ(resp.stop[0].reason, "cancel");
  EXPECT_EQ(resp.stop[0].grace_s, 7);
  AttemptReport gone{order.attempt_id, order.epoch, AttemptState::Cancelled, 143, running.started_at,
                     clock_.now_ms(), "killed by signal 15"};
  sync(agent, {gone});
  EXPECT_EQ(task(ids[0]).state, TaskState::Cancelled);
  // A second cancel is refused: the task already ended.
  auto again = cp_->cancel_task(alice_, ids[0]);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().status, 409);
}

// The liveness pass reads every cluster only when one whose syncs this
// process served has gone silent, or every 10 s. A cluster whose stored
// contact this process never saw (its syncs went to another server process
// on the same database) still goes offline, within those 10 s.
TEST_F(ControlPlaneTest, AClusterSilentOutsideThisProcessGoesOfflineWithinTheFullPassInterval) {
  auto [a1, c1cred] = connect("c1");
  auto [a2, c2cred] = connect("c2");
  clock_.advance_ms(50'000);  // this server has judged for 50 s (silence counts from its start)
  sync(a1, {});
  ASSERT_TRUE(cp_->check_liveness().ok());  // the first pass reads every cluster
  // c2 as another process left it: online, its last contact 50 s ago.
  ASSERT_TRUE(store_
                  ->write([&](Tx& tx) -> Status {
                    CP_ASSIGN(auto c, tx.get_cluster("c2"));
                    c->state = ClusterState::online;
                    c->last_contact = clock_.now_ms() - 50'000;
                    return tx.update_cluster(*c);
                  })
                  .ok());
  clock_.advance_ms(10'001);
  sync(a1, {});  // c1 keeps talking
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c2")->state, ClusterState::offline);
  EXPECT_EQ(cp_->get_cluster(admin_, "c2")->state_reason, "unreachable");
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::online);
}

TEST_F(ControlPlaneTest, SilentClusterGoesOfflineAndItsTasksMoveToAnotherCluster) {
  // Past lost_after the cluster is offline (unreachable), its attempt Lost; the task runs again on c2, once.
  auto [a1, c1cred] = connect("c1");
  auto [a2, c2cred] = connect("c2");
  sync(a1, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task placed = task(ids[0]);
  const std::string first_cluster = placed.assigned_cluster;
  ASSERT_EQ(first_cluster, "c1");  // c2 has no nodes yet
  auto order = sync(a1, {}).start.at(0);
  sync(a1, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, clock_.now_ms(), 0,
                          ""}});
  sync(a2, {});
  clock_.advance_ms(41'000);
  sync(a2, {});  // c2 keeps talking
  ASSERT_TRUE(cp_->check_liveness().ok());
  auto c1 = cp_->get_cluster(admin_, "c1");
  EXPECT_EQ(c1->state, ClusterState::offline);
  EXPECT_EQ(c1->state_reason, "unreachable");
  EXPECT_EQ(task(ids[0]).state, TaskState::Queued);
  ASSERT_TRUE(cp_->schedule_once().ok());
  Task moved = task(ids[0]);
  EXPECT_EQ(moved.assigned_cluster, "c2");
  EXPECT_EQ(cp_->get_task(admin_, ids[0])->at("attempts").as_array().size(), 2u);
  // The old agent comes back and reports its attempt still running: told superseded.
  auto back = sync(a1, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt,
                                      order.epoch, 0, ""}});
  ASSERT_EQ(back.stop.size(), 1u);
  EXPECT_EQ(back.stop[0].reason, "superseded");
  EXPECT_EQ(task(ids[0]).assigned_cluster, "c2");
}

TEST_F(ControlPlaneTest, ReportWithAStaleEpochIsRefused) {
  // A report carrying another epoch than the attempt's changes nothing and is answered superseded.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto order = sync(agent, {}).start.at(0);
  auto resp = sync(agent, {AttemptReport{order.attempt_id, order.epoch + 5, AttemptState::Succeeded, 0, 1, 2, ""}});
  ASSERT_EQ(resp.stop.size(), 1u);
  EXPECT_EQ(resp.stop[0].reason, "superseded");
  EXPECT_EQ(task(ids[0]).state, TaskState::Dispatched);
}

TEST_F(ControlPlaneTest, AnOlderSyncArrivingLateChangesNothing) {
  // A sync with a lower seq from the same agent instance (an aborted long-poll) is answered but not applied.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  SyncRequest newer;
  newer.cluster_id = "c1";
  newer.agent_instance = "instance-1";
  newer.seq = 5;
  auto started = cp_->agent_sync(agent, newer);
  ASSERT_TRUE(started.ok());
  auto order = started->start.at(0);
  SyncRequest older = newer;
  older.seq = 4;
  older.attempts = {AttemptReport{order.attempt_id, order.epoch, AttemptState::Failed, 1, 1, 2, "old news"}};
  auto answer = cp_->agent_sync(agent, older);
  ASSERT_TRUE(answer.ok());
  EXPECT_TRUE(answer->ack.empty());
  EXPECT_EQ(task(ids[0]).state, TaskState::Dispatched);
}

TEST_F(ControlPlaneTest, ACredentialOfOneClusterCannotSyncAsAnother) {
  // An agent credential is scoped to its cluster: syncing as another cluster is forbidden.
  auto [agent, cred] = connect("c1");
  SyncRequest req;
  req.cluster_id = "c2";
  auto r = cp_->agent_sync(agent, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 403);
  EXPECT_EQ(cp_->get_cluster(admin_, "c2")->state, ClusterState::offline);
}

TEST_F(ControlPlaneTest, ExpiredCredentialIsRefusedAndTheClusterSaysSo) {
  // After the credential expires, sync is refused with credential_expired and the cluster shows that reason.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  clock_.advance_ms(3601'000);
  auto r = cp_->authenticate_agent(cred);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "credential_expired");
  auto c = cp_->get_cluster(admin_, "c1");
  EXPECT_EQ(c->state_reason, "credential_expired");
}

// A server down for longer than lost_after_s heard nobody meanwhile: after
// its restart a cluster's silence counts from the restart (J, DESIGN.md
// "Fencing and outages"), so the outage itself loses no cluster.
TEST_F(ControlPlaneTest, ARestartedServerCountsSilenceOnlyFromItsStart) {
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  ASSERT_TRUE(cp_->check_liveness().ok());
  cp_.reset();
  clock_.advance_ms(100'000);  // down: no sync could be heard
  cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, ServerConfig{});
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::online) << "lost for the server's own outage";
  clock_.advance_ms(39'000);
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::online);
  clock_.advance_ms(2'000);  // silent for lost_after_s since the restart
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::offline);
}

TEST_F(ControlPlaneTest, BootstrapTokensAreOneTime) {
  // A bootstrap token registers one agent; the second use is refused.
  auto boot = cp_->create_bootstrap_token(admin_, "c1", json::value(nullptr));
  RegisterRequest req{"c1", std::string(boot->at("token").as_string()), "i", "v"};
  EXPECT_TRUE(cp_->agent_register(req, "").ok());
  auto again = cp_->agent_register(req, "");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().status, 401);
  // ... and one for c1 cannot register c2.
  auto boot2 = cp_->create_bootstrap_token(admin_, "c1", json::value(nullptr));
  RegisterRequest wrong{"c2", std::string(boot2->at("token").as_string()), "i", "v"};
  EXPECT_EQ(cp_->agent_register(wrong, "").error().status, 403);
}

TEST_F(ControlPlaneTest, MembersSubmitAndSeeOnlyTheirProjectGroups) {
  // mallory (pb) cannot submit into pa nor see pa's tasks; nothing is stored by the refused submit.
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  auto doc = parse_document(pipeline_yaml("pa", 1));
  auto refused = cp_->submit_pipeline(mallory_, *doc);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 403);
  auto theirs = cp_->list_tasks(mallory_, TaskQuery{});
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->items.empty());
  EXPECT_EQ(cp_->get_task(mallory_, ids[0]).error().status, 404);
  auto all = cp_->list_tasks(admin_, TaskQuery{});
  EXPECT_EQ(all->items.size(), 1u);
  // Members do not change resource groups.
  auto rg = parse_document("apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-x}\nspec: {}\n");
  EXPECT_EQ(cp_->apply_document(alice_, "ResourceGroup", *rg, std::nullopt).error().status, 403);
}

TEST_F(ControlPlaneTest, UnknownReferencesAreRefusedAndNothingIsStored) {
  // A pipeline naming an unknown project group, priority class or cluster is a 400 naming the field.
  for (const auto& [yaml, field] : std::vector<std::pair<std::string, std::string>>{
           {pipeline_yaml("nope", 1), "metadata.project_group"},
           {"apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\nspec:\n  priority: "
            "zzz\n  steps: [{name: s, command: [\"true\"]}]\n",
            "spec.priority"},
           {"apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\nspec:\n  cluster: "
            "c9\n  steps: [{name: s, command: [\"true\"]}]\n",
            "spec.cluster"}}) {
    auto doc = parse_document(yaml);
    ASSERT_TRUE(doc.ok());
    auto r = cp_->submit_pipeline(admin_, *doc);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(std::string(r.error().details.at("field").as_string()), field);
    EXPECT_FALSE(r.error().message_zh.empty());
  }
  EXPECT_TRUE(cp_->list_tasks(admin_, TaskQuery{})->items.empty());
}

// rg-a again, with defaults and a per-task maximum that names L40S GPUs.
constexpr std::string_view kRgWithLimits = R"(
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1, c2]
  quota:
    gpu/a100: {guaranteed: 4}
  default_request: {cpu: 500m, memory: 2Gi}
  max_per_task: {gpu/l40s: 2}
)";

TEST_F(ControlPlaneTest, FallbackShapesGetTheGroupsDefaults) {
  // default_request fills what a fallback leaves out (here memory, inherited from the step, and cpu it drops).
  auto rg = parse_document(kRgWithLimits);
  ASSERT_TRUE(cp_->apply_document(admin_, "ResourceGroup", *rg, std::string("rg-a")).ok());
  auto ids =
      submit(alice_, pipeline_yaml("pa", 1, "      fallbacks: [{after: 10m, resources: {cpu: 0, gpu_type: l40s}}]\n"));
  ASSERT_EQ(ids.size(), 1u);
  Step step = task(ids[0]).step;
  EXPECT_EQ(step.resources, Resources::parse_or_die("cpu:1,memory:2Gi,gpu/a100:1"));
  ASSERT_EQ(step.fallbacks.size(), 1u);
  EXPECT_EQ(step.fallbacks[0].after_s, 600);
  EXPECT_EQ(step.fallbacks[0].resources, Resources::parse_or_die("cpu:500m,memory:2Gi,gpu/l40s:1"));
}

TEST_F(ControlPlaneTest, FallbackShapesAreHeldToTheTaskMaximum) {
  // A fallback asking more than max_per_task is refused at its own path, and nothing is stored.
  auto rg = parse_document(kRgWithLimits);
  ASSERT_TRUE(cp_->apply_document(admin_, "ResourceGroup", *rg, std::string("rg-a")).ok());
  auto doc = parse_document(pipeline_yaml("pa", 1,
                                          "      fallbacks:\n"
                                          "        - {after: 10m, resources: {gpu: 2, gpu_type: l40s}}\n"
                                          "        - {after: 20m, resources: {gpu: 3, gpu_type: l40s}}\n"));
  ASSERT_TRUE(doc.ok());
  auto r = cp_->submit_pipeline(alice_, *doc);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "exceeds_task_maximum");
  EXPECT_EQ(std::string(r.error().details.at("field").as_string()), "spec.steps[0].fallbacks[1].resources.gpu/l40s");
  EXPECT_FALSE(r.error().message.empty());
  EXPECT_FALSE(r.error().message_zh.empty());
  EXPECT_TRUE(cp_->list_tasks(admin_, TaskQuery{})->items.empty());
}

TEST_F(ControlPlaneTest, FailedStepRetriesThenCancelsItsDependents) {
  // A failing step is retried max_retries times; then it fails and its dependents are cancelled.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1, "      max_retries: 1\n    - name: eval\n      depends_on: [train]\n"
                                                  "      command: [\"true\"]\n"));
  ASSERT_EQ(ids.size(), 2u);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_TRUE(cp_->schedule_once().ok());
    auto order = sync(agent, {}).start.at(0);
    EXPECT_EQ(order.attempt_number, attempt);
    EXPECT_EQ(order.epoch, attempt);
    sync(agent, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Failed, 1, 1, 2, "exit 1"}});
  }
  EXPECT_EQ(task(ids[0]).state, TaskState::Failed);
  EXPECT_EQ(task(ids[1]).state, TaskState::Cancelled);
}

TEST_F(ControlPlaneTest, LogsAreReadBackInOrderWhateverTheUploadOrder) {
  // Log chunks uploaded out of order and resent are read back once, in order.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto order = sync(agent, {}).start.at(0);
  ASSERT_TRUE(cp_->agent_logs(agent, LogUpload{order.attempt_id, order.epoch, 0, "combined", 6, "world\n"}).ok());
  auto partial = cp_->read_logs(alice_, ids[0], 0, 0);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->data, "");  // bytes 0..5 have not arrived: nothing past the gap
  ASSERT_TRUE(cp_->agent_logs(agent, LogUpload{order.attempt_id, order.epoch, 0, "combined", 0, "hello "}).ok());
  ASSERT_TRUE(cp_->agent_logs(agent, LogUpload{order.attempt_id, order.epoch, 0, "combined", 0, "hello "}).ok());
  auto all = cp_->read_logs(alice_, ids[0], 0, 0);
  EXPECT_EQ(all->data, "hello world\n");
  EXPECT_EQ(all->next_offset, 12);
  // A chunk with a stale epoch is refused.
  auto stale = cp_->agent_logs(agent, LogUpload{order.attempt_id, order.epoch + 1, 0, "combined", 12, "x"});
  EXPECT_EQ(stale.error().code, "stale_epoch");
}

}  // namespace
}  // namespace cp

namespace cp {
namespace {

// The retention pass removes tmp/ objects past their age, in bounded passes,
// and nothing outside tmp/. Object times are the files' real mtimes, so the
// simulated clock is placed relative to the real one.
TEST_F(ControlPlaneTest, EndedAttemptsAreInTheLedgerAndRunningOnesCountUpToNow) {
  // 2 GPUs from 23:00 on Jan 1 for 2 h: the report by day splits 1 h / 1 h at midnight; while running it
  // shows as outcome Running up to now; a member of another project group sees none of it.
  auto [agent, cred] = connect("c1");
  clock_.set_ms(kJan1 + 23 * kHour);
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 2));
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto order = sync(agent, {}).start.at(0);
  const Millis started = clock_.now_ms();
  sync(agent, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, started, 0, ""}});
  clock_.advance_ms(30 * 60'000);
  auto live = cp_->usage(admin_, kJan1, kJan1 + 3 * kDay, {"outcome"});
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ(live->at(0).at("outcome").as_string(), "Running");
  EXPECT_DOUBLE_EQ(live->at(0).at("gpu_seconds").as_double(), 2 * 1800.0);

  clock_.advance_ms(90 * 60'000);
  sync(agent, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Succeeded, 0, started, clock_.now_ms(), ""}});
  clock_.advance_ms(kDay);  // later reports do not grow
  auto by_day = cp_->usage(admin_, kJan1, kJan1 + 3 * kDay, {"day", "outcome", "cluster"});
  ASSERT_TRUE(by_day.ok());
  ASSERT_EQ(by_day->size(), 2u);
  EXPECT_EQ(by_day->at(0).at("day").as_string(), "2026-01-01");
  EXPECT_DOUBLE_EQ(by_day->at(0).at("gpu_seconds").as_double(), 7200.0);
  EXPECT_EQ(by_day->at(0).at("attempts").as_int64(), 1);
  EXPECT_DOUBLE_EQ(by_day->at(0).at("cpu_core_seconds").as_double(), 3600.0);
  EXPECT_EQ(by_day->at(1).at("day").as_string(), "2026-01-02");
  EXPECT_EQ(by_day->at(1).at("outcome").as_string(), "Succeeded");
  EXPECT_EQ(by_day->at(1).at("cluster").as_string(), "c1");
  EXPECT_EQ(by_day->at(1).at("attempts").as_int64(), 0);  // counted on the day it started
  // A period inside one day still reports that whole day.
  auto jan2 = cp_->usage(admin_, kJan1 + kDay + kHour, kJan1 + kDay + 2 * kHour, {"month"});
  ASSERT_TRUE(jan2.ok());
  ASSERT_EQ(jan2->size(), 1u);
  EXPECT_EQ(jan2->at(0).at("month").as_string(), "2026-01");
  EXPECT_DOUBLE_EQ(jan2->at(0).at("gpu_seconds").as_double(), 7200.0);
  auto other = cp_->usage(mallory_, kJan1, kJan1 + 3 * kDay, {"project_group"});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
  EXPECT_EQ(cp_->usage(admin_, kJan1, kJan1 + kDay, {"planet"}).error().status, 400);
}

TEST_F(ControlPlaneTest, RetentionRemovesOldFinishedTasksWithTheirEventsLogsAndCheckpointsButNotTheirUsage) {
  auto [agent, cred] = connect("c1");
  clock_.set_ms(kJan1);
  sync(agent, {});
  auto done = submit(alice_, pipeline_yaml("pa", 1));
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto order = sync(agent, {}).start.at(0);
  const Millis started = clock_.now_ms();
  sync(agent, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, started, 0, ""}});
  ASSERT_TRUE(cp_->agent_logs(agent, LogUpload{order.attempt_id, order.epoch, 0, "combined", 0, "hello\n"}).ok());
  ASSERT_TRUE(objects_->put("checkpoints/" + done[0] + "/step-1", "weights").ok());
  clock_.advance_ms(kHour);
  sync(agent, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Succeeded, 0, started, clock_.now_ms(), ""}});
  ASSERT_EQ(task(done[0]).state, TaskState::Succeeded);
  // One that waits all along (over quota) is not finished, whatever its age.
  auto waiting = submit(alice_, pipeline_yaml("pa", 64));

  // 100 days on: events (90 days) go, the finished task (180 days) stays.
  clock_.advance_ms(100 * kDay);
  auto pass = cp_->run_retention();
  ASSERT_TRUE(pass.ok()) << pass.error().to_string();
  EXPECT_GT(pass->events, 0);
  EXPECT_EQ(pass->tasks, 0);
  EXPECT_TRUE(cp_->list_events(admin_, EventQuery{"task", done[0], 0, 100})->empty());
  EXPECT_TRUE(cp_->get_task(admin_, done[0]).ok());

  clock_.advance_ms(100 * kDay);
  pass = cp_->run_retention();
  ASSERT_TRUE(pass.ok()) << pass.error().to_string();
  EXPECT_EQ(pass->tasks, 1);
  EXPECT_EQ(cp_->get_task(admin_, done[0]).error().status, 404);
  EXPECT_TRUE(objects_->list("logs/" + done[0] + "/").value().empty());
  EXPECT_TRUE(objects_->list("checkpoints/" + done[0] + "/").value().empty());
  EXPECT_EQ(task(waiting[0]).state, TaskState::Queued);
  auto usage = cp_->usage(admin_, kJan1, kJan1 + kDay, {"project_group"});
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_DOUBLE_EQ(usage->at(0).at("gpu_seconds").as_double(), 3600.0);
}

TEST_F(ControlPlaneTest, PreflightDriftIsStoredOnTheNodeAndEachChangeIsOneEvent) {
  auto [agent, cred] = connect("c1");
  SyncRequest req;
  req.cluster_id = "c1";
  req.agent_instance = "instance-1";
  req.nodes = {gpu_node("n1", 8), gpu_node("n2", 8), gpu_node("n3", 8)};
  for (auto& n : req.nodes) n.facts.kernel = "Linux 6.1";
  req.nodes[2].facts.kernel = "Linux 5.15";
  req.nodes[2].gpus.pop_back();  // sees 7 of its 8
  auto drift_events = [&] {
    auto e = cp_->list_events(admin_, EventQuery{"node", "c1/n3", 0, 100});
    EXPECT_TRUE(e.ok());
    return e.ok() ? e->size() : 0u;
  };
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  auto page = cp_->list_nodes_page(admin_, NodeQuery{"c1"});
  ASSERT_TRUE(page.ok());
  const auto& nodes = page->items;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_TRUE(nodes.at(0).drift.empty());
  ASSERT_EQ(nodes.at(2).drift.size(), 2u);
  EXPECT_EQ(nodes.at(2).drift[0].kind, "kernel");
  EXPECT_EQ(nodes.at(2).drift[1].kind, "gpus");
  EXPECT_EQ(drift_events(), 1u);
  // The same report again: nothing new to say.
  req.seq = 2;
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  EXPECT_EQ(drift_events(), 1u);
  // Fixed: the drift clears, and that is an event too.
  req.seq = 3;
  req.nodes[2] = gpu_node("n3", 8);
  req.nodes[2].facts.kernel = "Linux 6.1";
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  EXPECT_TRUE(cp_->get_node(admin_, "c1", "n3")->drift.empty());
  EXPECT_EQ(drift_events(), 2u);
}

// The first sync of agent instance-1 of c1: every node, with its fingerprint.
SyncRequest full_inventory_sync(std::vector<NodeReport> nodes, Millis sent_at) {
  SyncRequest req;
  req.cluster_id = "c1";
  req.agent_instance = "instance-1";
  req.seq = 1;
  req.nodes = std::move(nodes);
  req.inventory = inventory_fingerprint(req.nodes);
  req.sent_at = sent_at;
  return req;
}

// An agent that says its nodes are unchanged (model/inventory.h) costs no
// node read or write while the server holds the inventory it names; the GPU
// figures it sends are laid over the stored nodes when they are read.
TEST_F(ControlPlaneTest, NodesReportedUnchangedAreNeitherReadNorWritten) {
  auto [agent, cred] = connect("c1");
  SyncRequest req = full_inventory_sync({gpu_node("n1", 2), gpu_node("n2", 2)}, clock_.now_ms());
  auto r = cp_->agent_sync(agent, req);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->send_inventory);
  const Millis stored_at = clock_.now_ms();

  clock_.advance_ms(5000);
  SyncRequest same;
  same.cluster_id = "c1";
  same.agent_instance = "instance-1";
  same.seq = 2;
  same.sent_at = clock_.now_ms() + 100;
  same.nodes_unchanged = true;
  same.inventory = req.inventory;
  same.gpu_figures = {NodeGpuFigures{"n2", {55, 60}, {1000, 2000}}};
  r = cp_->agent_sync(agent, same);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->send_inventory);
  auto n2 = cp_->get_node(admin_, "c1", "n2").value();
  EXPECT_EQ(n2.updated_at, stored_at) << "not rewritten";
  EXPECT_EQ(n2.gpus[0].utilization, 55);
  EXPECT_EQ(n2.gpus[1].memory_used, 2000);
  NodeQuery q;
  q.cluster_id = "c1";
  auto page = cp_->list_nodes_page(admin_, q).value();
  ASSERT_EQ(page.items.size(), 2u) << "nodes left out are not nodes gone";
  EXPECT_EQ(page.items[1].gpus[1].utilization, 60);
  EXPECT_EQ(page.items[0].gpus[0].utilization, 0);
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->last_contact, clock_.now_ms()) << "still a sync";

  // The agent's clock moves past the slack and over the preflight limit: the
  // stored nodes are rewritten with the new offset, and flagged.
  clock_.advance_ms(5000);
  same.seq = 3;
  same.sent_at = clock_.now_ms() + 1500;
  same.gpu_figures.clear();
  ASSERT_TRUE(cp_->agent_sync(agent, same).ok());
  n2 = cp_->get_node(admin_, "c1", "n2").value();
  EXPECT_EQ(n2.facts.clock_offset_ms, 1500);
  EXPECT_EQ(n2.updated_at, clock_.now_ms());
  ASSERT_EQ(n2.drift.size(), 1u);
  EXPECT_EQ(n2.drift[0].kind, "clock_offset");
  EXPECT_EQ(n2.gpus[0].utilization, 55) << "live figures survive the rewrite";
  // And back within the slack of that: untouched again.
  clock_.advance_ms(5000);
  same.seq = 4;
  same.sent_at = clock_.now_ms() + 1400;
  ASSERT_TRUE(cp_->agent_sync(agent, same).ok());
  EXPECT_EQ(cp_->get_node(admin_, "c1", "n2")->facts.clock_offset_ms, 1500);
}

// What the server does not hold, it asks for: after a restart (the memory is
// gone), or when the agent names another inventory.
TEST_F(ControlPlaneTest, AnInventoryTheServerDoesNotHoldIsAskedFor) {
  auto [agent, cred] = connect("c1");
  SyncRequest req = full_inventory_sync({gpu_node("n1", 2)}, 0);
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());

  SyncRequest other = req;
  other.seq = 2;
  other.nodes.clear();
  other.nodes_unchanged = true;
  other.inventory = "0123456789abcdef0123456789abcdef";
  other.gpu_figures = {NodeGpuFigures{"n1", {99, 99}, {1, 1}}};
  auto r = cp_->agent_sync(agent, other);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->send_inventory);
  auto n1 = cp_->get_node(admin_, "c1", "n1").value();
  EXPECT_EQ(n1.gpus[0].utilization, 0) << "figures of an inventory not held are not taken";

  // A restarted server holds no fingerprint.
  cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, ServerConfig{});
  SyncRequest same = other;
  same.seq = 3;
  same.inventory = req.inventory;
  r = cp_->agent_sync(agent, same);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->send_inventory);
  EXPECT_TRUE(cp_->get_node(admin_, "c1", "n1").ok()) << "the stored nodes stay meanwhile";

  // An agent that has no nodes at all is not asked again and again.
  SyncRequest none = req;
  none.seq = 4;
  none.nodes.clear();
  none.inventory = inventory_fingerprint({});
  ASSERT_TRUE(cp_->agent_sync(agent, none).ok());
  none.seq = 5;
  none.nodes_unchanged = true;
  r = cp_->agent_sync(agent, none);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->send_inventory);
}

TEST_F(ControlPlaneTest, ANodeThatReportsNothingNewIsNotWrittenAgain) {
  auto [agent, cred] = connect("c1");
  SyncRequest req;
  req.cluster_id = "c1";
  req.agent_instance = "instance-1";
  req.nodes = {gpu_node("n1", 8)};
  req.sent_at = clock_.now_ms();
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  const Millis first = cp_->get_node(admin_, "c1", "n1")->updated_at;
  auto resync = [&](std::int64_t seq) {
    clock_.advance_ms(5000);
    req.seq = seq;
    req.sent_at = clock_.now_ms() + 40;  // the network's jitter: well inside the slack
    EXPECT_TRUE(cp_->agent_sync(agent, req).ok());
    return cp_->get_node(admin_, "c1", "n1").value();
  };
  // The same node again: not rewritten, while the cluster's contact moves on.
  EXPECT_EQ(resync(2).updated_at, first);
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->last_contact, clock_.now_ms());
  // A GPU's figures change: not written (they are live figures, kept in
  // memory), but a read of the node shows them.
  req.nodes[0].gpus[0].utilization = 77;
  auto n = resync(3);
  EXPECT_EQ(n.updated_at, first);
  EXPECT_EQ(n.gpus[0].utilization, 77);
  // The clock moves by more than the slack: written, with the new offset.
  const Millis written = n.updated_at;
  clock_.advance_ms(5000);
  req.seq = 4;
  req.sent_at = clock_.now_ms() + 600;
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  n = cp_->get_node(admin_, "c1", "n1").value();
  EXPECT_GT(n.updated_at, written);
  EXPECT_EQ(n.facts.clock_offset_ms, 600);
  // An admin's maintenance flag is the admin's: a sync that rewrites the node keeps it.
  ASSERT_TRUE(cp_->patch_node(admin_, "c1", "n1", json::parse(R"({"maintenance": true})")).ok());
  req.nodes[0].gpus[0].utilization = 5;
  resync(5);
  EXPECT_TRUE(cp_->get_node(admin_, "c1", "n1")->maintenance);
}

// An agent that measured its clock (model/clock_estimate.h) is taken at its
// word: a sync that queued for 2 s before the server took it up is not clock
// drift, and does not rewrite the nodes.
TEST_F(ControlPlaneTest, AMeasuredClockOffsetIsUsedInsteadOfTheTimeASyncQueued) {
  auto [agent, cred] = connect("c1");
  SyncRequest req = full_inventory_sync({gpu_node("n1", 2)}, clock_.now_ms());
  auto r = cp_->agent_sync(agent, req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->received_at, clock_.now_ms());
  EXPECT_GE(r->server_time, r->received_at);
  const Millis stored_at = cp_->get_node(admin_, "c1", "n1")->updated_at;

  clock_.advance_ms(5000);
  SyncRequest same;
  same.cluster_id = "c1";
  same.agent_instance = "instance-1";
  same.seq = 2;
  same.sent_at = clock_.now_ms() - 2000;  // sent 2 s ago: it queued
  same.clock_offset_ms = 30;
  same.clock_delay_ms = 12;
  same.nodes_unchanged = true;
  same.inventory = req.inventory;
  ASSERT_TRUE(cp_->agent_sync(agent, same).ok());
  auto n1 = cp_->get_node(admin_, "c1", "n1").value();
  EXPECT_EQ(n1.updated_at, stored_at) << "30 ms is within the slack of 0";
  EXPECT_TRUE(n1.drift.empty());

  // A measured offset past the limit is drift, whatever sent_at says.
  clock_.advance_ms(5000);
  same.seq = 3;
  same.sent_at = clock_.now_ms();
  same.clock_offset_ms = -1800;
  ASSERT_TRUE(cp_->agent_sync(agent, same).ok());
  n1 = cp_->get_node(admin_, "c1", "n1").value();
  EXPECT_EQ(n1.facts.clock_offset_ms, -1800);
  ASSERT_EQ(n1.drift.size(), 1u);
  EXPECT_EQ(n1.drift[0].kind, "clock_offset");
}

TEST(Retention, ExpiredTmpObjectsGoInBoundedPassesAndNothingElseDoes) {
  auto dir = std::filesystem::temp_directory_path() / ("cp-retention-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = std::move(open_store("sqlite::memory:")).value();
  ASSERT_TRUE(store->migrate().ok());
  auto objects = std::move(open_object_store("file://" + dir.string())).value();
  for (const char* key : {"tmp/a", "tmp/b", "tmp/c", "logs/t1/t1.1/r0/000000", "checkpoints/t1/model"}) {
    ASSERT_TRUE(objects->put(key, "x").ok());
  }
  SimulatedClock clock(SystemClock().now_ms());
  ServerConfig cfg;
  cfg.tmp_retention_s = 7 * 86400;
  cfg.retention_batch = 2;
  ControlPlane cp(*store, *objects, clock, cfg);

  // Fresh objects stay.
  EXPECT_EQ(cp.run_retention().value().tmp_objects, 0);
  // Eight days on: tmp/ expires, two objects a pass.
  clock.advance_ms(8LL * 86400 * 1000);
  auto pass = cp.run_retention().value();
  EXPECT_EQ(pass.tmp_objects, 2);
  EXPECT_TRUE(pass.more);
  EXPECT_EQ(cp.run_retention().value().tmp_objects, 1);
  pass = cp.run_retention().value();
  EXPECT_EQ(pass.tmp_objects, 0);
  EXPECT_FALSE(pass.more);
  EXPECT_TRUE(objects->list("tmp/").value().empty());
  EXPECT_EQ(objects->list("logs/").value().size(), 1u);
  EXPECT_EQ(objects->list("checkpoints/").value().size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(Retention, TheServerDocumentSetsTheAgeAndRefusesNonsense) {
  auto ok = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {tmp_retention_s: 86400}\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->server.control.tmp_retention_s, 86400);
  auto bad = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {tmp_retention_s: 5}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tmp_retention_s"), std::string::npos) << bad.error().message;
  ok = parse_fleet_config(
      "apiVersion: cubeplane/v1\nkind: Server\nspec: {log_retention_s: 0, event_retention_s: 3600, "
      "task_retention_s: 86400}\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->server.control.log_retention_s, 0);
  EXPECT_EQ(ok->server.control.event_retention_s, 3600);
  EXPECT_EQ(ok->server.control.task_retention_s, 86400);
  bad = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {task_retention_s: -1}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("task_retention_s"), std::string::npos) << bad.error().message;
}

TEST(ServerDocument, HttpThreadsDefaultToSixteenAndMustBeSane) {
  auto defaults = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {}\n");
  ASSERT_TRUE(defaults.ok()) << defaults.error().message;
  EXPECT_EQ(defaults->server.http_threads, 16);
  auto ok = parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec: {http_threads: 64}\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->server.http_threads, 64);
  for (const char* value : {"0", "-3", "257"}) {
    auto bad = parse_fleet_config(std::string("apiVersion: cubeplane/v1\nkind: Server\nspec: {http_threads: ") +
                                  value + "}\n");
    ASSERT_FALSE(bad.ok()) << value;
    EXPECT_NE(bad.error().message.find("spec.http_threads"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message_zh.find("1..256"), std::string::npos) << bad.error().message_zh;
  }
}

}  // namespace
}  // namespace cp
