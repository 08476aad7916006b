// Monitoring: the alert state machine (pure), the alert rules and
// deliveries of a ControlPlane, the fleet history behind the overview, and
// dry-run submission. Simulated clock throughout.
#include <algorithm>

#include "control_plane_fixture.h"
#include "server/alert_rules.h"

namespace cp {
namespace {

using namespace cp::testing;

// ------------------------------------------------------ the state machine

AlertCondition condition(const std::string& threshold, std::int64_t for_s) {
  AlertCondition c;
  c.rule = "quota_watermark";
  c.severity = "warning";
  c.labels = {{"resource_group", "rg"}, {"threshold", threshold}};
  c.value = 90;
  c.for_s = for_s;
  c.summary = "rg at 90%";
  c.receivers = {"webhook:http://a/", "webhook:http://b/"};
  return c;
}

struct Machine {
  std::vector<Alert> open;
  int ids = 0;
  AlertStep step(const std::vector<AlertCondition>& holding, Millis now) {
    auto s = step_alerts(open, holding, now, [&] { return "al-" + std::to_string(++ids); });
    for (const auto& id : s.dropped) std::erase_if(open, [&](const Alert& a) { return a.id == id; });
    for (const auto& a : s.changed) {
      auto it = std::find_if(open.begin(), open.end(), [&](const Alert& o) { return o.id == a.id; });
      if (it == open.end()) open.push_back(a);
      else *it = a;
    }
    std::erase_if(open, [](const Alert& a) { return a.state == AlertState::resolved; });
    return s;
  }
};

TEST(AlertRules, AConditionGoesPendingThenFiresAfterItsTimeThenResolves) {
  Machine m;
  auto s = m.step({condition("85", 300)}, 1000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].state, AlertState::pending);
  EXPECT_TRUE(s.changed[0].deliveries.empty());  // nobody hears of a pending alert
  EXPECT_EQ(s.changed[0].fingerprint, "quota_watermark|resource_group=rg|threshold=85");
  // Seen again, unchanged, before its time: nothing to write.
  EXPECT_TRUE(m.step({condition("85", 300)}, 200'000).changed.empty());
  s = m.step({condition("85", 300)}, 301'000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].state, AlertState::firing);
  EXPECT_EQ(s.changed[0].firing_at, 301'000);
  EXPECT_EQ(s.changed[0].started_at, 1000);
  ASSERT_EQ(s.changed[0].deliveries.size(), 2u);
  EXPECT_EQ(s.changed[0].deliveries[0].notify, "firing");
  EXPECT_EQ(s.changed[0].deliveries[0].state, "pending");
  // The same condition on later passes stays the same alert.
  auto held = condition("85", 300);
  held.value = 91;
  s = m.step({held}, 400'000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].id, "al-1");
  EXPECT_EQ(s.changed[0].value, 91);
  EXPECT_EQ(s.changed[0].deliveries[0].notify, "firing");  // no second notification
  s = m.step({}, 500'000);  // gone: still firing until it has stayed away 300 s
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].state, AlertState::firing);
  EXPECT_EQ(s.changed[0].cleared_at, 500'000);
  EXPECT_TRUE(m.step({}, 799'000).changed.empty());
  s = m.step({}, 800'000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].state, AlertState::resolved);
  EXPECT_EQ(s.changed[0].resolved_at, 800'000);
  ASSERT_EQ(s.changed[0].deliveries.size(), 2u);
  EXPECT_EQ(s.changed[0].deliveries[1].receiver, "webhook:http://b/");
  EXPECT_EQ(s.changed[0].deliveries[1].notify, "resolved");
  // A new occurrence is a new alert.
  s = m.step({condition("85", 300)}, 900'000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].id, "al-2");
}

TEST(AlertRules, AFigureWobblingAroundAWatermarkKeepsOneAlertFiring) {
  Machine m;
  m.step({condition("85", 300)}, 0);
  m.step({condition("85", 300)}, 300'000);
  ASSERT_EQ(m.open.size(), 1u);
  ASSERT_EQ(m.open[0].state, AlertState::firing);
  // Below, above, below, above ... every 15 s for ten minutes.
  Millis t = 300'000;
  for (int i = 0; i < 40; ++i) {
    t += 15'000;
    auto s = m.step(i % 2 == 0 ? std::vector<AlertCondition>{} : std::vector<AlertCondition>{condition("85", 300)}, t);
    for (const auto& a : s.changed) {
      EXPECT_EQ(a.state, AlertState::firing) << "pass " << i;
      EXPECT_EQ(a.deliveries.at(0).notify, "firing");
    }
    EXPECT_EQ(m.open.size(), 1u);
    EXPECT_EQ(m.open[0].id, "al-1");
  }
  // Gone for good: it resolves once it has stayed away for 5 minutes.
  const Millis gone = t + 15'000;
  m.step({}, gone);
  m.step({}, gone + 299'000);
  ASSERT_EQ(m.open.size(), 1u);
  auto s = m.step({}, gone + 300'000);
  ASSERT_EQ(s.changed.size(), 1u);
  EXPECT_EQ(s.changed[0].state, AlertState::resolved);
  EXPECT_EQ(s.changed[0].deliveries.at(0).notify, "resolved");
}

TEST(AlertRules, APendingAlertWhoseConditionClearsIsDroppedUntold) {
  Machine m;
  m.step({condition("70", 300), condition("85", 0)}, 0);
  ASSERT_EQ(m.open.size(), 2u);
  EXPECT_EQ(m.open[1].state, AlertState::firing);  // for 0 s: fires at once
  auto s = m.step({condition("85", 0)}, 10'000);
  EXPECT_EQ(s.dropped, std::vector<std::string>{"al-1"});
  EXPECT_TRUE(s.changed.empty());
}

TEST(AlertRules, DeliveriesBackOffAndGiveUp) {
  EXPECT_EQ(delivery_backoff_ms(1), 10'000);
  EXPECT_EQ(delivery_backoff_ms(2), 20'000);
  EXPECT_EQ(delivery_backoff_ms(4), 80'000);
  EXPECT_EQ(delivery_backoff_ms(30), 15 * 60'000);
  Machine m;
  m.step({condition("85", 0)}, 0);
  Alert a = m.open[0];
  EXPECT_EQ(due_deliveries(a, 0).size(), 2u);
  record_delivery(a, 0, 0, "");
  EXPECT_EQ(a.deliveries[0].state, "ok");
  Millis now = 0;
  for (int i = 1; i <= kMaxDeliveryAttempts; ++i) {
    ASSERT_EQ(due_deliveries(a, now), std::vector<std::size_t>{1});
    record_delivery(a, 1, now, "connection refused");
    EXPECT_TRUE(due_deliveries(a, now).empty());
    now = a.deliveries[1].next_at;
  }
  EXPECT_EQ(a.deliveries[1].state, "failed");
  EXPECT_EQ(a.deliveries[1].attempts, kMaxDeliveryAttempts);
  EXPECT_EQ(a.deliveries[1].last_error, "connection refused");
  EXPECT_TRUE(due_deliveries(a, now + 3'600'000).empty());
}

// ----------------------------------------------------- the control plane

class MonitoringTest : public ControlPlaneTest {
 protected:
  void configure(ServerConfig& cfg) override {
    cfg.alert_webhooks = {"http://hooks.example/alerts"};
    cfg.queue_wait_alert_s = 1800;
  }
  void SetUp() override {
    ControlPlaneTest::SetUp();
    cp_->set_alert_sender([this](const std::string& url, const std::string& body) {
      sent_.emplace_back(url, body);
      return fail_with_;
    });
  }

  std::vector<Alert> alerts(const std::string& rule, std::set<AlertState> states = {}) {
    auto page = cp_->list_alerts(admin_, AlertQuery{std::move(states), 1000, ""});
    EXPECT_TRUE(page.ok());
    std::vector<Alert> out;
    for (const auto& a : page->items) {
      if (a.rule == rule) out.push_back(a);
    }
    return out;
  }

  // Runs one attempt of `task_id` on c1 through Running (and to `end` when given).
  void run_on_c1(const Principal& agent, const std::string& task_id, std::optional<AttemptState> end = {}) {
    ASSERT_TRUE(cp_->schedule_once().ok());
    auto resp = sync(agent, {});
    auto order = std::find_if(resp.start.begin(), resp.start.end(), [&](const auto& o) { return o.task_id == task_id; });
    ASSERT_NE(order, resp.start.end());
    AttemptReport r{order->attempt_id, order->epoch, AttemptState::Running, std::nullopt, clock_.now_ms(), 0, ""};
    sync(agent, {r});
    if (!end) return;
    clock_.advance_ms(1000);
    r.state = *end;
    r.exit_code = *end == AttemptState::Succeeded ? 0 : 1;
    r.finished_at = clock_.now_ms();
    sync(agent, {r});
  }

  // The notifications sent about `rule`, in order: (url, body).
  std::vector<std::pair<std::string, json::object>> sent_for(const std::string& rule) {
    std::vector<std::pair<std::string, json::object>> out;
    for (const auto& [url, body] : sent_) {
      auto o = parse_json(body).value().as_object();
      if (o.at("alerts").as_array().at(0).at("labels").at("alertname").as_string() == rule) out.emplace_back(url, o);
    }
    return out;
  }

  std::vector<std::pair<std::string, std::string>> sent_;
  std::string fail_with_;
};

TEST_F(MonitoringTest, QuotaWatermarksFireAfterTheirTimeAndAreDeliveredInAlertmanagerFormat) {
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 4));  // all 4 guaranteed GPUs of rg-a: 100 %
  run_on_c1(agent, ids[0]);
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto pending = alerts("quota_watermark");
  ASSERT_EQ(pending.size(), 3u);  // 70, 85 and 95 %
  for (const auto& a : pending) EXPECT_EQ(a.state, AlertState::pending);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_TRUE(sent_for("quota_watermark").empty());

  clock_.advance_ms(300'000);  // the resource group's default: sustained 5 minutes
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto firing = alerts("quota_watermark", {AlertState::firing});
  ASSERT_EQ(firing.size(), 3u);
  std::map<std::string, std::string> severity;
  for (const auto& a : firing) severity[a.labels.at("threshold")] = a.severity;
  EXPECT_EQ(severity, (std::map<std::string, std::string>{{"70", "info"}, {"85", "warning"}, {"95", "critical"}}));
  EXPECT_NE(firing[0].summary.find("100%"), std::string::npos) << firing[0].summary;
  EXPECT_NE(firing[0].summary_zh.find("资源组 rg-a"), std::string::npos);

  ASSERT_TRUE(cp_->deliver_alerts().ok());
  auto sent = sent_for("quota_watermark");
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].first, "http://hooks.example/alerts");
  const auto& body = sent[0].second;
  EXPECT_EQ(body.at("version").as_string(), "4");
  EXPECT_EQ(body.at("status").as_string(), "firing");
  const auto& alert = body.at("alerts").as_array().at(0).as_object();
  EXPECT_EQ(alert.at("labels").at("alertname").as_string(), "quota_watermark");
  EXPECT_EQ(alert.at("labels").at("resource_group").as_string(), "rg-a");
  EXPECT_EQ(alert.at("endsAt").as_string(), "0001-01-01T00:00:00Z");
  for (const auto& a : alerts("quota_watermark")) EXPECT_EQ(a.deliveries.at(0).state, "ok");
  // Delivered once: another pass sends nothing.
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sent_for("quota_watermark").size(), 3u);

  // The work ends: all three resolve and each receiver hears so.
  auto resp = sync(agent, {});
  (void)resp;
  auto t = task(ids[0]);
  AttemptReport done{t.current_attempt, 1, AttemptState::Succeeded, 0, clock_.now_ms() - 1000, clock_.now_ms(), ""};
  sync(agent, {done});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());  // clear, but not yet for as long as it had to hold
  EXPECT_EQ(alerts("quota_watermark", {AlertState::firing}).size(), 3u);
  for (int i = 0; i < 10; ++i) {  // 5 minutes, the agent syncing meanwhile
    clock_.advance_ms(30'000);
    sync(agent, {});
  }
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  EXPECT_EQ(alerts("quota_watermark", {AlertState::resolved}).size(), 3u);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  sent = sent_for("quota_watermark");
  ASSERT_EQ(sent.size(), 6u);
  EXPECT_EQ(sent[5].second.at("status").as_string(), "resolved");
  auto events = cp_->list_events(admin_, EventQuery{"alert", "", 0, 100});
  ASSERT_TRUE(events.ok());
  auto quota_events = std::count_if(events->begin(), events->end(),
                                    [](const Event& e) { return e.data.at("rule").as_string() == "quota_watermark"; });
  EXPECT_EQ(quota_events, 9);  // pending, firing, resolved for each
}

TEST_F(MonitoringTest, AFailedDeliveryIsRetriedWithBackoffAndVisible) {
  // c2 never connected: offline, firing after cluster_offline_for_s.
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  clock_.advance_ms(60'000);
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto offline = alerts("cluster_offline", {AlertState::firing});
  ASSERT_EQ(offline.size(), 2u);  // c1 and c2: neither has an agent
  EXPECT_EQ(offline[0].severity, "critical");
  EXPECT_NE(offline[0].summary.find("never_connected"), std::string::npos);

  fail_with_ = "HTTP 502";
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sent_.size(), 2u);
  ASSERT_TRUE(cp_->deliver_alerts().ok());  // not due yet
  EXPECT_EQ(sent_.size(), 2u);
  auto a = alerts("cluster_offline").at(0);
  EXPECT_EQ(a.deliveries.at(0).attempts, 1);
  EXPECT_EQ(a.deliveries.at(0).last_error, "HTTP 502");
  EXPECT_EQ(a.deliveries.at(0).next_at, clock_.now_ms() + 10'000);
  for (int i = 1; i < kMaxDeliveryAttempts; ++i) {
    clock_.advance_ms(delivery_backoff_ms(i));
    ASSERT_TRUE(cp_->deliver_alerts().ok());
  }
  EXPECT_EQ(sent_.size(), 2u * kMaxDeliveryAttempts);
  a = alerts("cluster_offline").at(0);
  EXPECT_EQ(a.deliveries.at(0).state, "failed");
  auto m = cp_->metrics();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->alert_deliveries_failed, 2);
  EXPECT_EQ((m->alerts[{"cluster_offline", "critical", "firing"}]), 2);

  // The agent connects: a minute later c1's alert resolves, c2's stays.
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  EXPECT_EQ(alerts("cluster_offline", {AlertState::firing}).size(), 2u);
  clock_.advance_ms(30'000);
  sync(agent, {});
  clock_.advance_ms(30'000);
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto firing = alerts("cluster_offline", {AlertState::firing});
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].labels.at("cluster"), "c2");
}

TEST_F(MonitoringTest, AQueueThatWaitsTooLongAlertsAndNodesNotReadyAlertAfterTheirTime) {
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  submit(alice_, pipeline_yaml("pa", 5));  // more than rg-a's 4 GPUs: waits
  ASSERT_TRUE(cp_->schedule_once().ok());
  clock_.advance_ms(1799'000);
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  EXPECT_TRUE(alerts("queue_wait").empty());
  clock_.advance_ms(2'000);
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto q = alerts("queue_wait", {AlertState::firing});
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].labels.at("resource_group"), "rg-a");
  EXPECT_EQ(q[0].value, 1801);

  SyncRequest req;
  req.cluster_id = "c1";
  req.agent_instance = "instance-1";
  req.nodes = {gpu_node("c1-n1", 8)};
  req.nodes[0].ready = false;
  req.nodes[0].reason = "nvidia driver not loaded";
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto n = alerts("node_not_ready");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].state, AlertState::pending);
  EXPECT_NE(n[0].summary.find("nvidia driver not loaded"), std::string::npos);
  clock_.advance_ms(300'000);
  ASSERT_TRUE(cp_->agent_sync(agent, req).ok());
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  EXPECT_EQ(alerts("node_not_ready", {AlertState::firing}).size(), 1u);
}

TEST_F(MonitoringTest, BudgetAlertsAreSeenOnlyByWhoMayReadTheProjectGroup) {
  auto doc = parse_document(
      "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\nspec:\n  members: [{user: alice, role: "
      "member}]\n  default_resource_group: rg-a\n  monthly_budget: {gpu_hours: 1}\n");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(cp_->apply_document(admin_, "ProjectGroup", *doc, std::string("pa")).ok());
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 2));
  run_on_c1(agent, ids[0]);
  clock_.advance_ms(24 * 60'000);  // 2 GPUs x 24 min = 0.8 GPU hours
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto b = alerts("budget");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].labels.at("threshold"), "80");
  EXPECT_EQ(b[0].severity, "warning");
  clock_.advance_ms(6 * 60'000);  // 1.0 GPU hours
  sync(agent, {});
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  EXPECT_EQ(alerts("budget").size(), 2u);
  auto seen_by = [&](const Principal& p) {
    auto page = cp_->list_alerts(p, AlertQuery{});
    EXPECT_TRUE(page.ok());
    return std::count_if(page->items.begin(), page->items.end(), [](const Alert& a) { return a.rule == "budget"; });
  };
  EXPECT_EQ(seen_by(alice_), 2);
  EXPECT_EQ(seen_by(mallory_), 0);
}

TEST_F(MonitoringTest, TheOverviewShowsAllocationWaitAndFailuresPerClusterAndBucket) {
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 2));
  clock_.advance_ms(30'000);  // waits 30 s in the queue
  run_on_c1(agent, ids[0]);
  ASSERT_TRUE(cp_->sample_fleet().ok());  // 2 of 8 GPUs allocated
  clock_.advance_ms(5'000);
  auto t = task(ids[0]);
  AttemptReport failed{t.current_attempt, 1, AttemptState::Failed, 1, clock_.now_ms() - 5000, clock_.now_ms(), ""};
  sync(agent, {failed});
  ASSERT_TRUE(cp_->sample_fleet().ok());  // 0 of 8

  auto o = cp_->overview(alice_, 1);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->at("bucket_s").as_int64(), 60);
  EXPECT_EQ(o->at("buckets").as_array().size(), 60u);
  const auto& clusters = o->at("clusters").as_array();
  ASSERT_EQ(clusters.size(), 2u);
  const auto& c1 = clusters[0].as_object();
  EXPECT_EQ(c1.at("id").as_string(), "c1");
  EXPECT_EQ(c1.at("gpus").at("total").as_int64(), 8);
  const auto& cells = c1.at("cells").as_array();
  ASSERT_EQ(cells.size(), 60u);
  const auto& now_cell = cells.back().as_object();
  EXPECT_DOUBLE_EQ(now_cell.at("allocation").as_double(), 100.0 * 2 / 16);  // two samples: 2 and 0 of 8
  EXPECT_DOUBLE_EQ(now_cell.at("queue_wait_s").as_double(), 30.0);
  EXPECT_DOUBLE_EQ(now_cell.at("failure_rate").as_double(), 1.0);
  EXPECT_DOUBLE_EQ(now_cell.at("gpu_utilization").as_double(), 0.0);  // the devices report 0 %
  EXPECT_TRUE(cells.front().at("allocation").is_null());              // no sample an hour ago
  const auto& c2 = clusters[1].as_object();
  EXPECT_TRUE(c2.at("cells").as_array().back().at("gpu_utilization").is_null());  // c2 has no nodes
  const auto& totals = o->at("totals").as_object();
  EXPECT_EQ(totals.at("nodes").as_int64(), 1);
  ASSERT_EQ(totals.at("gpus_by_type").as_array().size(), 1u);
  EXPECT_EQ(totals.at("gpus_by_type").as_array()[0].at("idle").as_int64(), 8);
  // A day shows hour columns; the hour rows hold the same sums.
  auto day = cp_->overview(alice_, 24);
  ASSERT_TRUE(day.ok());
  EXPECT_EQ(day->at("bucket_s").as_int64(), 3600);
  EXPECT_DOUBLE_EQ(day->at("clusters").as_array()[0].at("cells").as_array().back().at("queue_wait_s").as_double(),
                   30.0);
  EXPECT_EQ(cp_->overview(alice_, 0).error().status, 400);
}

TEST_F(MonitoringTest, UtilizationIsTheMeanOfMeasuredDevicesAndUnmeasuredOnesGiveNoFigure) {
  auto [a1, c1] = connect("c1");
  auto [a2, c2] = connect("c2");
  SyncRequest req;
  req.agent_instance = "instance-1";
  req.cluster_id = "c1";
  req.nodes = {gpu_node("c1-n1", 4)};
  for (int i = 0; i < 4; ++i) req.nodes[0].gpus[i].utilization = i < 2 ? 90 : -1;  // two measured
  ASSERT_TRUE(cp_->agent_sync(a1, req).ok());
  req.cluster_id = "c2";
  req.nodes = {gpu_node("c2-n1", 2)};
  for (auto& g : req.nodes[0].gpus) g.utilization = -1;  // declared GPUs: nothing measured
  ASSERT_TRUE(cp_->agent_sync(a2, req).ok());
  ASSERT_TRUE(cp_->sample_fleet().ok());
  auto o = cp_->overview(alice_, 1);
  ASSERT_TRUE(o.ok());
  const auto& clusters = o->at("clusters").as_array();
  EXPECT_DOUBLE_EQ(clusters[0].at("cells").as_array().back().at("gpu_utilization").as_double(), 90.0);
  EXPECT_TRUE(clusters[1].at("cells").as_array().back().at("gpu_utilization").is_null());
  EXPECT_DOUBLE_EQ(clusters[1].at("cells").as_array().back().at("allocation").as_double(), 0.0);
}

TEST_F(MonitoringTest, ADryRunChecksEverythingAndCreatesNothing) {
  auto doc = parse_document(pipeline_yaml("pa", 2));
  ASSERT_TRUE(doc.ok());
  auto r = cp_->submit_pipeline(alice_, *doc, /*dry_run=*/true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->at("dry_run").as_bool());
  EXPECT_EQ(r->at("tasks").as_array().size(), 1u);
  auto page = cp_->list_tasks(admin_, TaskQuery{});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->items.empty());
  auto bad = parse_document(pipeline_yaml("pa", 2, "  resource_group: nope\n"));
  ASSERT_TRUE(bad.ok());
  auto e = cp_->submit_pipeline(alice_, *bad, true);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, "unknown_reference");
}

}  // namespace
}  // namespace cp

namespace cp {
namespace {

using namespace cp::testing;

constexpr std::string_view kPrices = R"(
apiVersion: cubeplane/v1
kind: PriceTable
metadata: {name: default}
spec:
  currency: USD
  prices:
    - {resource: gpu/a100, per_hour: "2.00", from: 2026-01-01}
    - {resource: gpu/a100, per_hour: "3.00", from: 2026-01-02}
    - {resource: cpu, per_hour: "0.04", from: 2026-01-01}
)";

TEST_F(MonitoringTest, CostPricesEachDayAtItsOwnPriceAndBudgetsInMoneyAlert) {
  auto doc = parse_document(std::string(kPrices));
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(cp_->apply_price_table(alice_, *doc).error().status, 403);
  ASSERT_TRUE(cp_->apply_price_table(admin_, *doc).ok());
  auto budget = parse_document(
      "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\nspec:\n  members: [{user: alice, role: "
      "member}]\n  default_resource_group: rg-a\n  monthly_budget: {cost: 10}\n");
  ASSERT_TRUE(cp_->apply_document(admin_, "ProjectGroup", *budget, std::string("pa")).ok());

  // One A100 and one core from Jan 1 22:00 to Jan 2 02:00: 2 h at 2.00 and
  // 2 h at 3.00 for the GPU, 4 h at 0.04 for the core.
  clock_.set_ms(kJan1 + 22 * kHour);
  auto [agent, cred] = connect("c1");
  sync(agent, {});
  auto ids = submit(alice_, pipeline_yaml("pa", 1));
  run_on_c1(agent, ids[0]);
  clock_.set_ms(kJan1 + 26 * kHour);
  auto t = task(ids[0]);
  AttemptReport done{t.current_attempt, 1, AttemptState::Succeeded, 0, kJan1 + 22 * kHour, kJan1 + 26 * kHour, ""};
  sync(agent, {done});

  auto cents = [&](Millis from, Millis to, std::vector<std::string> by) {
    auto rows = cp_->usage(admin_, from, to, by);
    EXPECT_TRUE(rows.ok());
    std::vector<std::int64_t> out;
    for (const auto& r : *rows) {
      out.push_back(r.at("cost_cents").as_int64());
      EXPECT_EQ(r.at("currency").as_string(), "USD");
    }
    return out;
  };
  EXPECT_EQ(cents(kJan1, kJan1 + 31 * kDay, {"project_group"}), std::vector<std::int64_t>{1016});
  EXPECT_EQ(cents(kJan1, kJan1 + 31 * kDay, {"month"}), std::vector<std::int64_t>{1016});
  EXPECT_EQ(cents(kJan1, kJan1 + 31 * kDay, {"day"}), (std::vector<std::int64_t>{408, 608}));
  // A period inside one price: the same figures without reading by day.
  EXPECT_EQ(cents(kJan1 + kDay, kJan1 + 2 * kDay, {"project_group"}), std::vector<std::int64_t>{608});

  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  auto b = alerts("budget");
  ASSERT_EQ(b.size(), 2u);  // 80 % and 100 % of 10.00
  for (const auto& a : b) EXPECT_EQ(a.labels.at("budget"), "cost");
  EXPECT_NE(b[0].summary.find("10.16 of 10.00 USD"), std::string::npos) << b[0].summary;

  // The table reads back as a document, in the same words.
  auto back = cp_->get_price_table(alice_);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->at("spec").at("prices").as_array().size(), 3u);
  EXPECT_EQ(back->at("spec").at("prices").as_array()[2].at("per_hour").as_string(), "3");  // by resource, then date
}

}  // namespace
}  // namespace cp
