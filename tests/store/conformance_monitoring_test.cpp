// Conformance: the cluster history (additive samples by width and bucket)
// and alerts (whole documents, open set, pages, retention).
#include <algorithm>

#include "store_conformance.h"

namespace cp::testing {
namespace {

ClusterSample sample(const std::string& cluster, std::int64_t width, Millis bucket, std::int64_t n) {
  ClusterSample s;
  s.cluster = cluster;
  s.width_s = width;
  s.bucket = bucket;
  s.samples = n;
  s.gpus_total = 8 * n;
  s.gpus_allocated = 3 * n;
  s.gpu_util_sum = 50 * n;
  s.gpu_util_devices = n;
  s.dispatched = 2 * n;
  s.wait_ms = 1000 * n;
  s.finished = n;
  s.failed = n / 2;
  return s;
}

TEST_P(StoreTest, ClusterSamplesAddUpByKeyAndReadBackByWidthAndRange) {
  const Millis h = 3'600'000;
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.add_cluster_samples({sample("b", 3600, kT0, 1), sample("a", 3600, kT0 + h, 2), sample("a", 60, kT0, 5)}));
    // The same key again adds to every column; rows of one call add up too.
    return tx.add_cluster_samples({sample("b", 3600, kT0, 3), sample("b", 3600, kT0, 4)});
  });
  auto rows = read([&](Tx& tx) { return tx.cluster_samples(3600, kT0, kT0 + 2 * h); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].cluster, "a");  // by cluster, then bucket
  EXPECT_EQ(rows[0].bucket, kT0 + h);
  EXPECT_EQ(rows[1].cluster, "b");
  const auto& b = rows[1];
  EXPECT_EQ(b.width_s, 3600);
  EXPECT_EQ(b.samples, 8);
  EXPECT_EQ(b.gpus_total, 64);
  EXPECT_EQ(b.gpus_allocated, 24);
  EXPECT_EQ(b.gpu_util_sum, 400);
  EXPECT_EQ(b.gpu_util_devices, 8);
  EXPECT_EQ(b.dispatched, 16);
  EXPECT_EQ(b.wait_ms, 8000);
  EXPECT_EQ(b.finished, 8);
  EXPECT_EQ(b.failed, 0 + 1 + 2);
  // [from, to): the bucket at `to` is out; other widths are apart.
  EXPECT_EQ(read([&](Tx& tx) { return tx.cluster_samples(3600, kT0, kT0 + h); }).size(), 1u);
  EXPECT_EQ(read([&](Tx& tx) { return tx.cluster_samples(60, kT0, kT0 + h); }).size(), 1u);
}

TEST_P(StoreTest, ClusterSamplesRefuseBadWidthsAndBucketsAndChangeNothing) {
  auto e = write_error([&](Tx& tx) -> Status {
    CP_TRY(tx.add_cluster_samples({sample("a", 60, kT0, 1)}));
    return tx.add_cluster_samples({sample("a", 120, kT0, 1)});
  });
  EXPECT_EQ(e.status, 400);
  e = write_error([&](Tx& tx) { return tx.add_cluster_samples({sample("a", 3600, kT0 + 60'000, 1)}); });
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(read([&](Tx& tx) { return tx.cluster_samples(60, 0, kT0 * 2); }).empty());
  EXPECT_EQ(read_error([&](Tx& tx) { return tx.cluster_samples(7, 0, 1); }).status, 400);
}

TEST_P(StoreTest, ClusterSamplesAreDeletedOldestFirstPerWidthInBatches) {
  write([&](Tx& tx) -> Status {
    std::vector<ClusterSample> rows;
    for (int i = 0; i < 10; ++i) rows.push_back(sample("a", 60, kT0 + i * 60'000, 1));
    rows.push_back(sample("a", 3600, kT0, 1));
    return tx.add_cluster_samples(rows);
  });
  std::int64_t n = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(n, tx.delete_cluster_samples_before(60, kT0 + 5 * 60'000, 3));
    return {};
  });
  EXPECT_EQ(n, 3);
  auto left = read([&](Tx& tx) { return tx.cluster_samples(60, 0, kT0 * 2); });
  ASSERT_EQ(left.size(), 7u);
  EXPECT_EQ(left.front().bucket, kT0 + 3 * 60'000);
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(n, tx.delete_cluster_samples_before(60, kT0 + 5 * 60'000, 100));
    return {};
  });
  EXPECT_EQ(n, 2);
  EXPECT_EQ(read([&](Tx& tx) { return tx.cluster_samples(3600, 0, kT0 * 2); }).size(), 1u);
}

Alert make_alert(const std::string& id, Millis started, AlertState state) {
  Alert a;
  a.id = id;
  a.fingerprint = "quota_watermark|resource_group=rg|threshold=85|" + id;
  a.rule = "quota_watermark";
  a.severity = "warning";
  a.state = state;
  a.labels = {{"resource_group", "rg"}, {"threshold", "85"}};
  a.summary = "rg uses 87%";
  a.summary_zh = "rg 已使用 87%";
  a.value = 87.5;
  a.started_at = started;
  a.firing_at = state == AlertState::pending ? 0 : started + 1000;
  a.resolved_at = state == AlertState::resolved ? started + 2000 : 0;
  a.updated_at = started + 2000;
  if (state != AlertState::pending) {
    a.deliveries.push_back(AlertDelivery{"webhook:http://x/", "firing", "ok", 1, "", 0, started + 1000});
  }
  return a;
}

TEST_P(StoreTest, AlertsRoundTripAndTheOpenSetFollowsStateAndDeliveries) {
  auto resolved_told = make_alert("al-1", kT0, AlertState::resolved);
  auto resolved_untold = make_alert("al-2", kT0 + 1, AlertState::resolved);
  resolved_untold.deliveries[0].state = "pending";
  resolved_untold.deliveries[0].notify = "resolved";
  auto firing = make_alert("al-3", kT0 + 2, AlertState::firing);
  auto pending = make_alert("al-4", kT0 + 3, AlertState::pending);
  write([&](Tx& tx) -> Status {
    for (const auto& a : {resolved_told, resolved_untold, firing, pending}) CP_TRY(tx.upsert_alert(a));
    return {};
  });
  auto open = read([&](Tx& tx) { return tx.open_alerts(); });
  std::vector<std::string> ids;
  for (const auto& a : open) ids.push_back(a.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"al-2", "al-3", "al-4"}));
  EXPECT_EQ(to_json(open[1]), to_json(firing));  // every field back

  // Once its last delivery is made, a resolved alert leaves the open set.
  resolved_untold.deliveries[0].state = "ok";
  write([&](Tx& tx) { return tx.upsert_alert(resolved_untold); });
  EXPECT_EQ(read([&](Tx& tx) { return tx.open_alerts(); }).size(), 2u);

  write([&](Tx& tx) { return tx.delete_alert("al-4"); });
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.delete_alert("al-4"); }).status, 404);
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.upsert_alert(Alert{}); }).status, 400);
}

TEST_P(StoreTest, AlertsPageNewestFirstFilteredByState) {
  write([&](Tx& tx) -> Status {
    for (int i = 0; i < 25; ++i) {
      // Pairs share a start time: pages must break ties by id.
      char id[16];
      std::snprintf(id, sizeof id, "al-%02d", i);
      CP_TRY(tx.upsert_alert(make_alert(id, kT0 + i / 2, i % 3 == 0 ? AlertState::firing : AlertState::resolved)));
    }
    return {};
  });
  auto all_pages = [&](AlertQuery q) {
    std::vector<std::string> got;
    for (int pages = 0; pages < 50; ++pages) {
      auto page = read([&](Tx& tx) { return tx.list_alerts(q); });
      for (const auto& a : page.items) got.push_back(a.id);
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    return got;
  };
  AlertQuery q;
  q.limit = 4;
  auto got = all_pages(q);
  ASSERT_EQ(got.size(), 25u);
  EXPECT_EQ(got.front(), "al-24");
  EXPECT_EQ(got[1], "al-23");
  EXPECT_EQ(got[2], "al-22");
  EXPECT_EQ(got.back(), "al-00");
  q.states = {AlertState::firing};
  got = all_pages(q);
  EXPECT_EQ(got, (std::vector<std::string>{"al-24", "al-21", "al-18", "al-15", "al-12", "al-09", "al-06", "al-03",
                                           "al-00"}));
  q.cursor = "garbage";
  EXPECT_EQ(read_error([&](Tx& tx) { return tx.list_alerts(q); }).status, 400);
}

TEST_P(StoreTest, ResolvedAlertsAreDeletedAfterTheirAgeOnly) {
  auto old_resolved = make_alert("al-1", kT0, AlertState::resolved);
  auto old_firing = make_alert("al-2", kT0, AlertState::firing);
  auto new_resolved = make_alert("al-3", kT0 + 10'000, AlertState::resolved);
  write([&](Tx& tx) -> Status {
    for (const auto& a : {old_resolved, old_firing, new_resolved}) CP_TRY(tx.upsert_alert(a));
    return {};
  });
  std::int64_t n = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(n, tx.delete_alerts_resolved_before(kT0 + 5000, 100));
    return {};
  });
  EXPECT_EQ(n, 1);
  auto left = read([&](Tx& tx) { return tx.list_alerts(AlertQuery{}); });
  ASSERT_EQ(left.items.size(), 2u);
  EXPECT_EQ(left.items[0].id, "al-3");
  EXPECT_EQ(left.items[1].id, "al-2");
}

TEST_P(StoreTest, AuditEntriesPageNewestFirstByUserAndTimeAndAgeOut) {
  write([&](Tx& tx) -> Status {
    for (int i = 0; i < 12; ++i) {
      AuditEntry e;
      char id[16];
      std::snprintf(id, sizeof id, "audit-%02d", i);
      e.id = id;
      e.at = kT0 + (i / 2) * 1000;  // pairs share a time
      e.user = i % 3 == 0 ? "alice" : "admin";
      e.method = "PUT";
      e.path = "/api/v1/resource-groups/rg";
      e.status = 200;
      e.request = json::object{{"spec", json::object{{"cohort", "x"}}}};
      e.after = json::object{{"n", i}};
      CP_TRY(tx.append_audit(e));
    }
    return {};
  });
  AuditQuery q;
  q.limit = 5;
  std::vector<std::string> got;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = read([&](Tx& tx) { return tx.list_audit(q); });
    for (const auto& e : page.items) got.push_back(e.id);
    if (page.next_cursor.empty()) break;
    q.cursor = page.next_cursor;
  }
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(got.front(), "audit-11");
  EXPECT_EQ(got.back(), "audit-00");
  AuditQuery alice;
  alice.user = "alice";
  alice.from = kT0 + 1000;
  alice.to = kT0 + 5000;
  auto page = read([&](Tx& tx) { return tx.list_audit(alice); });
  std::vector<std::string> ids;
  for (const auto& e : page.items) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"audit-09", "audit-06", "audit-03"}));
  EXPECT_EQ(page.items[0].request.at("spec").at("cohort").as_string(), "x");
  std::int64_t n = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(n, tx.delete_audit_before(kT0 + 2000, 100));
    return {};
  });
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace cp::testing

namespace cp::testing {
namespace {

TEST_P(StoreTest, ApprovalsRoundTripAndListByPairStateAndGroupsNewestFirst) {
  auto make = [](const std::string& id, const std::string& pg, const std::string& rg, ApprovalState st, Millis at) {
    Approval a;
    a.id = id;
    a.project_group = pg;
    a.resource_group = rg;
    a.requested_by = "alice";
    a.reason = "deadline";
    a.state = st;
    a.created_at = at;
    a.expires_at = st == ApprovalState::approved ? at + 1000 : 0;
    return a;
  };
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.upsert_approval(make("ap-1", "pa", "rg-b", ApprovalState::denied, kT0)));
    CP_TRY(tx.upsert_approval(make("ap-2", "pa", "rg-b", ApprovalState::pending, kT0 + 1)));
    CP_TRY(tx.upsert_approval(make("ap-3", "pb", "rg-b", ApprovalState::approved, kT0 + 1)));
    return tx.upsert_approval(make("ap-4", "pa", "rg-c", ApprovalState::pending, kT0 + 2));
  });
  auto ids = [&](ApprovalQuery q) {
    std::vector<std::string> out;
    for (int pages = 0; pages < 10; ++pages) {
      auto page = read([&](Tx& tx) { return tx.list_approvals(q); });
      for (const auto& a : page.items) out.push_back(a.id);
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    return out;
  };
  ApprovalQuery q;
  q.limit = 1;
  EXPECT_EQ(ids(q), (std::vector<std::string>{"ap-4", "ap-3", "ap-2", "ap-1"}));
  q.project_group = "pa";
  q.resource_group = "rg-b";
  EXPECT_EQ(ids(q), (std::vector<std::string>{"ap-2", "ap-1"}));
  q.states = {ApprovalState::pending, ApprovalState::approved};
  EXPECT_EQ(ids(q), (std::vector<std::string>{"ap-2"}));
  ApprovalQuery mine;
  mine.project_groups = std::set<std::string>{"pb"};
  EXPECT_EQ(ids(mine), (std::vector<std::string>{"ap-3"}));
  mine.project_groups = std::set<std::string>{};
  EXPECT_TRUE(ids(mine).empty());

  // A decision rewrites the row; the document comes back whole.
  auto a = make("ap-2", "pa", "rg-b", ApprovalState::approved, kT0 + 1);
  a.decided_by = "bob";
  a.note = "go";
  a.decided_at = kT0 + 500;
  write([&](Tx& tx) { return tx.upsert_approval(a); });
  auto back = read([&](Tx& tx) { return tx.get_approval("ap-2"); });
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(to_json(*back), to_json(a));
  EXPECT_FALSE(read([&](Tx& tx) { return tx.get_approval("ap-9"); }).has_value());
  EXPECT_TRUE(back->holds_at(kT0 + 1000));
  EXPECT_FALSE(back->holds_at(kT0 + 1001));
}

}  // namespace
}  // namespace cp::testing
