// Conformance: the task list split over project groups and states, the usage
// ledger, and retention.
#include <algorithm>
#include <map>
#include <random>

#include "store_conformance.h"

namespace cp::testing {
namespace {

using V = std::vector<std::string>;

TEST_P(StoreTest, ListTasksOverSeveralGroupsAndStatesMergesInOrderAcrossPages) {
  // 4 groups x 4 states, 3 tasks per millisecond: every split query
  // contributes to every page, and page boundaries fall inside ties.
  const std::vector<std::string> groups = {"pg-a", "pg-b", "pg-c", "pg-d"};
  const std::vector<TaskState> states = {TaskState::Queued, TaskState::Running, TaskState::Succeeded,
                                         TaskState::Failed};
  std::mt19937 rng(7);
  std::vector<Task> tasks;
  for (int i = 0; i < 300; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "t-%04d", static_cast<int>(rng() % 10000));
    tasks.push_back(make_task(std::string(id) + "-" + std::to_string(i), kT0 + i / 3, states[rng() % 4],
                              groups[rng() % 4]));
  }
  write([&](Tx& tx) -> Status {
    for (const auto& t : tasks) CP_TRY(tx.insert_task(t));
    return {};
  });
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
    return std::tie(a.created_at, a.id) > std::tie(b.created_at, b.id);
  });
  auto expect_pages = [&](TaskQuery q) {
    std::vector<std::string> want;
    for (const auto& t : tasks) {
      bool group_ok = (!q.project_groups || q.project_groups->count(t.project_group)) &&
                      (q.project_group.empty() || q.project_group == t.project_group);
      bool state_ok = q.states.empty() || q.states.count(t.state);
      if (group_ok && state_ok) want.push_back(t.id);
    }
    std::vector<std::string> got;
    for (int pages = 0; pages < 100; ++pages) {
      auto page = read([&](Tx& tx) { return tx.list_tasks(q); });
      for (const auto& t : page.items) got.push_back(t.id);
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    EXPECT_EQ(got, want);
  };
  TaskQuery q;
  q.limit = 7;
  q.project_groups = std::set<std::string>{"pg-a", "pg-b", "pg-d"};
  expect_pages(q);
  q.states = {TaskState::Queued, TaskState::Failed};
  expect_pages(q);
  q.project_groups.reset();
  expect_pages(q);
  q.project_group = "pg-c";
  q.states = {TaskState::Running, TaskState::Succeeded, TaskState::Failed};
  expect_pages(q);
}

UsageRow usage_row(Millis day, std::string group, std::string cluster, std::int64_t gpu_ms) {
  UsageRow r;
  r.day = day;
  r.project_group = std::move(group);
  r.resource_group = "rg-a";
  r.cluster = std::move(cluster);
  r.user = "alice";
  r.gpu_type = "nvidia-a100-80gb";
  r.outcome = "Succeeded";
  r.attempts = 1;
  r.gpu_ms = gpu_ms;
  r.cpu_core_ms = gpu_ms * 4;
  r.memory_mib_s = gpu_ms / 10;
  return r;
}

TEST_P(StoreTest, UsageRowsOfTheSameKeyAddUpAndGroupByAnyColumn) {
  constexpr Millis kDay = 86'400'000;
  write([&](Tx& tx) {
    return tx.add_usage({usage_row(kT0, "pg-a", "c1", 1000), usage_row(kT0, "pg-a", "c1", 500),
                         usage_row(kT0 + kDay, "pg-a", "c2", 7000), usage_row(kT0 + kDay, "pg-b", "c1", 30)});
  });
  // A second call adds to the same rows.
  write([&](Tx& tx) { return tx.add_usage({usage_row(kT0, "pg-a", "c1", 1)}); });

  UsageQuery q{kT0, kT0 + 2 * kDay, {"project_group", "cluster"}};
  auto rows = read([&](Tx& tx) { return tx.usage_totals(q); });
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].project_group, "pg-a");
  EXPECT_EQ(rows[0].cluster, "c1");
  EXPECT_EQ(rows[0].gpu_ms, 1501);
  EXPECT_EQ(rows[0].cpu_core_ms, 6004);
  EXPECT_EQ(rows[0].memory_mib_s, 150);  // 100 + 50 + 0
  EXPECT_EQ(rows[0].attempts, 3);
  EXPECT_EQ(rows[0].day, 0);  // not grouped by
  EXPECT_EQ(rows[0].user, "");
  EXPECT_EQ(rows[1].cluster, "c2");
  EXPECT_EQ(rows[1].gpu_ms, 7000);
  EXPECT_EQ(rows[2].project_group, "pg-b");

  // By day, over the first day only: [from, to) on whole days.
  q = {kT0, kT0 + kDay, {"day"}};
  rows = read([&](Tx& tx) { return tx.usage_totals(q); });
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].day, kT0);
  EXPECT_EQ(rows[0].gpu_ms, 1501);

  // No grouping: one row of totals.
  q = {kT0, kT0 + 2 * kDay, {}};
  rows = read([&](Tx& tx) { return tx.usage_totals(q); });
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].gpu_ms, 8531);

  EXPECT_EQ(read_error([&](Tx& tx) { return tx.usage_totals({kT0, kT0 + kDay, {"planet"}}); }).status, 400);
}

TEST_P(StoreTest, UsageOverWholeMonthsAndTheDaysAroundThemSumsAsTheDaysDo) {
  // Whole months are read from a monthly rollup and the days around them
  // from the daily rows; every kind of range must give what adding the days
  // gives. Days from 2025-12-20 to 2026-04-10, a row every 2 days, in two
  // groups, added in two transactions.
  constexpr Millis kDay = 86'400'000;
  const Millis first = kT0 - 12 * kDay;
  std::vector<UsageRow> rows;
  for (int d = 0; d < 111; d += 2) {
    rows.push_back(usage_row(first + d * kDay, d % 3 ? "pg-a" : "pg-b", "c1", 1000 + d));
  }
  write([&](Tx& tx) { return tx.add_usage(std::vector<UsageRow>(rows.begin(), rows.begin() + 30)); });
  write([&](Tx& tx) { return tx.add_usage(std::vector<UsageRow>(rows.begin() + 30, rows.end())); });
  const Millis jan = kT0, feb = kT0 + 31 * kDay, mar = feb + 28 * kDay, apr = mar + 31 * kDay;
  const std::vector<std::pair<Millis, Millis>> ranges = {
      {jan, feb},                    // one whole month
      {jan, apr},                    // three
      {first, apr + 10 * kDay},      // days before, three months, days after
      {jan + 5 * kDay, mar + kDay},  // days, February, a day
      {feb + 3 * kDay, feb + 20 * kDay},  // inside one month
      {first, jan},                  // the days of December only
      {jan - kDay, feb},             // a day, then January
  };
  for (const auto& [from, to] : ranges) {
    std::map<std::string, std::int64_t> want_gpu, want_attempts;
    for (const auto& r : rows) {
      if (r.day < from || r.day >= to) continue;
      want_gpu[r.project_group] += r.gpu_ms;
      want_attempts[r.project_group] += r.attempts;
    }
    auto got = read([&](Tx& tx) { return tx.usage_totals({from, to, {"project_group"}}); });
    std::map<std::string, std::int64_t> got_gpu, got_attempts;
    for (const auto& r : got) {
      got_gpu[r.project_group] = r.gpu_ms;
      got_attempts[r.project_group] = r.attempts;
    }
    EXPECT_EQ(got_gpu, want_gpu) << "range [" << from << ", " << to << ")";
    EXPECT_EQ(got_attempts, want_attempts) << "range [" << from << ", " << to << ")";
    // Grouped by day as well: the same totals, from the daily rows alone.
    auto by_day = read([&](Tx& tx) { return tx.usage_totals({from, to, {"day"}}); });
    std::int64_t day_total = 0, want_total = 0;
    for (const auto& r : by_day) day_total += r.gpu_ms;
    for (const auto& [group, gpu] : want_gpu) want_total += gpu;
    EXPECT_EQ(day_total, want_total) << "range [" << from << ", " << to << ")";
  }
}

TEST_P(StoreTest, DeleteUsageMonthsRemovesWholeMonthsFromBothRollupsAndNothingElse) {
  constexpr Millis kDay = 86'400'000;
  const Millis jan = kT0, feb = kT0 + 31 * kDay, mar = feb + 28 * kDay;
  std::vector<UsageRow> rows;
  for (int d = -3; d < 62; ++d) rows.push_back(usage_row(jan + d * kDay, "pg-a", "c1", 1000));
  write([&](Tx& tx) { return tx.add_usage(rows); });
  std::int64_t removed = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(removed, tx.delete_usage_months(feb, mar));
    return {};
  });
  EXPECT_EQ(removed, 28);
  // Read over whole months (the monthly rollup) and by day (the daily rows).
  for (const std::vector<std::string>& by : {std::vector<std::string>{}, std::vector<std::string>{"day"}}) {
    std::int64_t total = 0;
    for (const auto& r : read([&](Tx& tx) { return tx.usage_totals({jan - 3 * kDay, mar + 3 * kDay, by}); })) {
      total += r.gpu_ms;
    }
    EXPECT_EQ(total, (3 + 31 + 3) * 1000);
    std::int64_t february = 0;
    for (const auto& r : read([&](Tx& tx) { return tx.usage_totals({feb, mar, by}); })) february += r.gpu_ms;
    EXPECT_EQ(february, 0);
  }
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.delete_usage_months(feb + kDay, mar); }).status, 400);
}

TEST_P(StoreTest, EventsFilterByTypeAndAWalkStartsAtTheFirstEventSinceATime) {
  write([](Tx& tx) -> Status {
    for (int i = 0; i < 6; ++i) {
      CP_TRY(tx.append_event(make_event(i % 2 ? "attempt" : "task", "x", kT0 + i * 1000,
                                        i % 2 ? "attempt.state" : "task.state")));
    }
    return {};
  });
  EventQuery q;
  q.type = "attempt.state";
  auto odd = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(odd.size(), 3u);
  for (const auto& e : odd) EXPECT_EQ(e.type, "attempt.state");
  std::int64_t first = 0, none = -1;
  EXPECT_OK(store_->read([&](Tx& tx) -> Status {
    CP_ASSIGN(first, tx.first_event_since(kT0 + 2500));
    CP_ASSIGN(none, tx.first_event_since(kT0 + 60'000));
    return {};
  }));
  EXPECT_EQ(none, 0);
  q.after_id = first - 1;
  auto since = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(since.size(), 2u);  // at 3 s and 5 s
  EXPECT_EQ(since.front().at, kT0 + 3000);
}

TEST_P(StoreTest, DeleteEventsBeforeRemovesTheOldestInBatches) {
  write([](Tx& tx) -> Status {
    for (int i = 0; i < 10; ++i) CP_TRY(tx.append_event(make_event("task", "t-1", kT0 + i * 1000, "task.state")));
    return {};
  });
  auto deleted = [&](Millis before, int limit) {
    std::int64_t n = -1;
    write([&](Tx& tx) -> Status {
      CP_ASSIGN(n, tx.delete_events_before(before, limit));
      return {};
    });
    return n;
  };
  EXPECT_EQ(deleted(kT0 + 6000, 4), 4);  // at 0..3 s
  EXPECT_EQ(deleted(kT0 + 6000, 4), 2);  // 4 and 5 s
  EXPECT_EQ(deleted(kT0 + 6000, 4), 0);
  auto left = read([](Tx& tx) { return tx.list_events({}); });
  ASSERT_EQ(left.size(), 4u);
  EXPECT_EQ(left.front().at, kT0 + 6000);
}

TEST_P(StoreTest, FinishedTasksBeforeAndDeleteTaskTakeItsAttemptsEventsAndLastPipeline) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_pipeline(make_pipeline("p-1", "pg-a")));
    Task old_done = make_task("t-1", kT0, TaskState::Succeeded);
    old_done.updated_at = kT0 + 10;
    Task old_failed = make_task("t-2", kT0, TaskState::Failed);
    old_failed.updated_at = kT0 + 20;
    Task new_done = make_task("t-3", kT0, TaskState::Cancelled);
    new_done.updated_at = kT0 + 5000;
    Task old_running = make_task("t-4", kT0, TaskState::Running);
    old_running.updated_at = kT0;
    for (const auto& t : {old_done, old_failed, new_done, old_running}) CP_TRY(tx.insert_task(t));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c1", AttemptState::Preempted)));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 2, "c1", AttemptState::Succeeded)));
    CP_TRY(tx.insert_attempt(make_attempt("t-3", 1, "c1", AttemptState::Cancelled)));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0, "task.state")));
    CP_TRY(tx.append_event(make_event("attempt", "t-1.2", kT0, "attempt.state")));
    CP_TRY(tx.append_event(make_event("attempt", "t-10.1", kT0, "attempt.state")));  // another task's
    CP_TRY(tx.append_event(make_event("task", "t-3", kT0, "task.state")));
    return {};
  });
  auto ids = read([](Tx& tx) { return tx.finished_tasks_before(kT0 + 1000, 10); });
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (V{"t-1", "t-2"}));
  EXPECT_EQ(read([](Tx& tx) { return tx.finished_tasks_before(kT0 + 1000, 1); }).size(), 1u);

  write([](Tx& tx) { return tx.delete_task("t-1"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-1"); }), std::nullopt);
  EXPECT_TRUE(read([](Tx& tx) { return tx.attempts_of_task("t-1"); }).empty());
  auto events = read([](Tx& tx) { return tx.list_events({}); });
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].object_id, "t-10.1");
  EXPECT_EQ(events[1].object_id, "t-3");
  // The pipeline stays while it has tasks, and goes with the last one.
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_pipeline("p-1"); }).has_value());
  write([](Tx& tx) -> Status {
    for (const char* id : {"t-2", "t-3", "t-4"}) CP_TRY(tx.delete_task(id));
    return {};
  });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_pipeline("p-1"); }), std::nullopt);
  EXPECT_EQ(read([](Tx& tx) { return tx.list_events({}); }).size(), 1u);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_task("t-1"); }).code, "not_found");
}

}  // namespace
}  // namespace cp::testing
