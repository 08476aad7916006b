// Conformance: pipelines, tasks (filters, keyset pagination, visibility),
// attempts and events.
#include <algorithm>

#include "store_conformance.h"

namespace cp::testing {
namespace {

std::string task_id(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "t-%04d", i);
  return buf;
}

// Pages through list_tasks with `q`, returning every id in the order seen.
std::vector<std::string> all_pages(Store& store, TaskQuery q, int* pages = nullptr) {
  std::vector<std::string> ids;
  int count = 0;
  do {
    TaskPage page;
    Status s = store.read([&](Tx& tx) -> Status {
      CP_ASSIGN(page, tx.list_tasks(q));
      return {};
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    if (!s.ok() || ++count > 100) break;
    for (const auto& t : page.items) ids.push_back(t.id);
    q.cursor = page.next_cursor;
  } while (!q.cursor.empty());
  if (pages != nullptr) *pages = count;
  return ids;
}

// ------------------------------------------------------------ pipelines

TEST_P(StoreTest, PipelinesRoundTripAndInsertTwiceIsAlreadyExists) {
  Pipeline p = make_pipeline("p-1", "pg-a");
  write([&](Tx& tx) { return tx.insert_pipeline(p); });
  auto got = read([](Tx& tx) { return tx.get_pipeline("p-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(p, *got);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_pipeline("p-2"); }), std::nullopt);
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.insert_pipeline(p); }).code, "already_exists");
}

// ---------------------------------------------------------------- tasks

TEST_P(StoreTest, TasksRoundTripEveryFieldAndUpdateReplacesThem) {
  Task t = make_task("t-1", kT0);
  t.exit_code = 3;
  t.cancel_requested = true;
  write([&](Tx& tx) { return tx.insert_task(t); });
  auto got = read([](Tx& tx) { return tx.get_task("t-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(t, *got);

  t.state = TaskState::Running;
  t.assigned_cluster = "c-east";
  t.reasons.clear();
  t.exit_code.reset();
  t.started_at = kT0 + 50;
  t.updated_at = kT0 + 50;
  write([&](Tx& tx) { return tx.update_task(t); });
  got = read([](Tx& tx) { return tx.get_task("t-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(t, *got);
  // The indexed copies follow the document.
  TaskQuery q;
  q.states = {TaskState::Running};
  q.cluster = "c-east";
  EXPECT_EQ(ids_of(read([&](Tx& tx) { return tx.list_tasks(q); }).items), std::vector<std::string>{"t-1"});
}

TEST_P(StoreTest, TaskInsertTwiceIsAlreadyExistsAndUpdateOfUnknownIsNotFound) {
  write([](Tx& tx) { return tx.insert_task(make_task("t-1", kT0)); });
  EXPECT_EQ(write_error([](Tx& tx) { return tx.insert_task(make_task("t-1", kT0)); }).code, "already_exists");
  EXPECT_EQ(write_error([](Tx& tx) { return tx.update_task(make_task("t-2", kT0)); }).code, "not_found");
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-2"); }), std::nullopt);
}

TEST_P(StoreTest, TaskStateChangeAndItsEventCommitTogether) {
  write([](Tx& tx) { return tx.insert_task(make_task("t-1", kT0)); });
  write([](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task("t-1"));
    t->state = TaskState::Admitted;
    CP_TRY(tx.update_task(*t));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0 + 1, "task.state")));
    return {};
  });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-1"); })->state, TaskState::Admitted);
  EXPECT_EQ(read([](Tx& tx) { return tx.list_events(EventQuery{}); }).size(), 1u);
}

TEST_P(StoreTest, ABodyThatFailsRollsBackTheTaskAndTheEvent) {
  // Both writes succeed, then the body returns an error: neither may remain.
  write([](Tx& tx) { return tx.insert_task(make_task("t-1", kT0)); });
  Status s = store_->write([](Tx& tx) -> Status {
    Task t = make_task("t-1", kT0);
    t.state = TaskState::Admitted;
    CP_TRY(tx.update_task(t));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0 + 1, "task.state")));
    CP_TRY(tx.insert_task(make_task("t-2", kT0)));
    return errors::conflict("quota re-check failed", "配额复核失败");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "conflict");  // the body's own error comes back unchanged
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-1"); })->state, TaskState::Queued);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-2"); }), std::nullopt);
  EXPECT_TRUE(read([](Tx& tx) { return tx.list_events(EventQuery{}); }).empty());
}

TEST_P(StoreTest, ListTasksIsNewestFirstWithIdBreakingTies) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-b", kT0 + 1)));
    CP_TRY(tx.insert_task(make_task("t-a", kT0 + 1)));
    CP_TRY(tx.insert_task(make_task("t-c", kT0)));
    return tx.insert_task(make_task("t-d", kT0 + 2));
  });
  auto page = read([](Tx& tx) { return tx.list_tasks(TaskQuery{}); });
  EXPECT_EQ(ids_of(page.items), (std::vector<std::string>{"t-d", "t-b", "t-a", "t-c"}));
  EXPECT_EQ(page.next_cursor, "");
}

TEST_P(StoreTest, ListTasksFilters) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("q-a-x", kT0 + 1, TaskState::Queued, "pg-a", "rg-x")));
    CP_TRY(tx.insert_task(make_task("r-a-y", kT0 + 2, TaskState::Running, "pg-a", "rg-y")));
    CP_TRY(tx.insert_task(make_task("r-b-x", kT0 + 3, TaskState::Running, "pg-b", "rg-x")));
    Task other = make_task("s-b-y", kT0 + 4, TaskState::Succeeded, "pg-b", "rg-y");
    other.pipeline_id = "p-2";
    other.assigned_cluster = "c-west";
    return tx.insert_task(other);
  });
  auto ids = [&](TaskQuery q) { return ids_of(read([&](Tx& tx) { return tx.list_tasks(q); }).items); };
  using V = std::vector<std::string>;

  TaskQuery q;
  q.states = {TaskState::Running};
  EXPECT_EQ(ids(q), (V{"r-b-x", "r-a-y"}));
  q.states = {TaskState::Queued, TaskState::Succeeded};
  EXPECT_EQ(ids(q), (V{"s-b-y", "q-a-x"}));

  q = {};
  q.project_group = "pg-a";
  EXPECT_EQ(ids(q), (V{"r-a-y", "q-a-x"}));
  q = {};
  q.resource_group = "rg-x";
  EXPECT_EQ(ids(q), (V{"r-b-x", "q-a-x"}));
  q = {};
  q.cluster = "c-east";
  EXPECT_EQ(ids(q), (V{"r-b-x", "r-a-y"}));
  q = {};
  q.pipeline_id = "p-2";
  EXPECT_EQ(ids(q), (V{"s-b-y"}));

  q = {};  // filters combine with AND
  q.states = {TaskState::Running};
  q.project_group = "pg-b";
  q.resource_group = "rg-x";
  EXPECT_EQ(ids(q), (V{"r-b-x"}));
  q.resource_group = "rg-y";
  EXPECT_EQ(ids(q), V{});
}

TEST_P(StoreTest, ListTasksVisibilitySetRestrictsToTheGivenProjectGroups) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-a", kT0 + 1, TaskState::Queued, "pg-a")));
    CP_TRY(tx.insert_task(make_task("t-b", kT0 + 2, TaskState::Queued, "pg-b")));
    return tx.insert_task(make_task("t-c", kT0 + 3, TaskState::Queued, "pg-c"));
  });
  auto ids = [&](TaskQuery q) { return ids_of(read([&](Tx& tx) { return tx.list_tasks(q); }).items); };
  using V = std::vector<std::string>;

  TaskQuery q;
  q.project_groups = std::set<std::string>{"pg-a", "pg-c"};
  EXPECT_EQ(ids(q), (V{"t-c", "t-a"}));
  // A member of no project group sees nothing, not everything.
  q.project_groups = std::set<std::string>{};
  EXPECT_EQ(ids(q), V{});
  // Asking for a group outside the visible set finds nothing either.
  q.project_groups = std::set<std::string>{"pg-a"};
  q.project_group = "pg-b";
  EXPECT_EQ(ids(q), V{});
}

TEST_P(StoreTest, PagingThrough250TasksReturnsEachExactlyOnceInOrder) {
  // Three tasks per millisecond, so page boundaries fall inside ties.
  std::vector<Task> tasks;
  for (int i = 0; i < 250; ++i) tasks.push_back(make_task(task_id(i), kT0 + i / 3));
  write([&](Tx& tx) -> Status {
    for (const auto& t : tasks) CP_TRY(tx.insert_task(t));
    return {};
  });
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
    return std::tie(a.created_at, a.id) > std::tie(b.created_at, b.id);
  });

  TaskQuery q;
  q.limit = 100;
  int pages = 0;
  EXPECT_EQ(all_pages(*store_, q, &pages), ids_of(tasks));
  EXPECT_EQ(pages, 3);
}

TEST_P(StoreTest, CursorIsStableWhileNewTasksArrive) {
  // Tasks submitted after the first page sort before the cursor, so later
  // pages neither repeat nor skip anything.
  std::vector<std::string> expected;
  write([&](Tx& tx) -> Status {
    for (int i = 0; i < 250; ++i) CP_TRY(tx.insert_task(make_task(task_id(i), kT0 + i / 3)));
    return {};
  });
  for (int i = 249; i >= 0; --i) expected.push_back(task_id(i));  // ids grow with created_at here

  TaskQuery q;
  q.limit = 100;
  auto first = read([&](Tx& tx) { return tx.list_tasks(q); });
  ASSERT_EQ(first.items.size(), 100u);
  const Task& last = first.items.back();
  write([&](Tx& tx) -> Status {
    for (int i = 0; i < 20; ++i) CP_TRY(tx.insert_task(make_task("n-" + std::to_string(i), kT0 + 1'000 + i)));
    // Same millisecond as the cursor's task but a greater id: sorts before it.
    return tx.insert_task(make_task(last.id + "z", last.created_at));
  });

  std::vector<std::string> seen = ids_of(first.items);
  q.cursor = first.next_cursor;
  auto rest = all_pages(*store_, q);
  seen.insert(seen.end(), rest.begin(), rest.end());
  EXPECT_EQ(seen, expected);
}

TEST_P(StoreTest, InvalidCursorIs400InvalidCursor) {
  write([](Tx& tx) { return tx.insert_task(make_task("t-1", kT0)); });
  for (std::string cursor : {"not base64!", "YWJj" /* "abc": no colon */, "MTJ4OnQtMQ" /* "12x:t-1" */, "A"}) {
    TaskQuery q;
    q.cursor = cursor;
    Error e = read_error([&](Tx& tx) { return tx.list_tasks(q); });
    EXPECT_EQ(e.code, "invalid_cursor") << cursor;
    EXPECT_EQ(e.status, 400) << cursor;
  }
}

TEST_P(StoreTest, LimitIsClampedTo1Through1000) {
  write([](Tx& tx) -> Status {
    for (int i = 0; i < 1001; ++i) CP_TRY(tx.insert_task(make_task(task_id(i), kT0 + i)));
    return {};
  });
  TaskQuery q;
  q.limit = 0;
  auto page = read([&](Tx& tx) { return tx.list_tasks(q); });
  EXPECT_EQ(page.items.size(), 1u);
  EXPECT_NE(page.next_cursor, "");
  q.limit = 1'000'000;
  page = read([&](Tx& tx) { return tx.list_tasks(q); });
  EXPECT_EQ(page.items.size(), 1000u);
  EXPECT_NE(page.next_cursor, "");
  q.limit = 1001;
  q.cursor = page.next_cursor;
  page = read([&](Tx& tx) { return tx.list_tasks(q); });
  EXPECT_EQ(ids_of(page.items), std::vector<std::string>{task_id(0)});
  EXPECT_EQ(page.next_cursor, "");
}

TEST_P(StoreTest, TasksInStatesAreOldestFirst) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-3", kT0 + 3, TaskState::Queued)));
    CP_TRY(tx.insert_task(make_task("t-1", kT0 + 1, TaskState::Running)));
    CP_TRY(tx.insert_task(make_task("t-2", kT0 + 2, TaskState::Succeeded)));
    return tx.insert_task(make_task("t-0", kT0 + 3, TaskState::Queued));
  });
  auto tasks = read([](Tx& tx) { return tx.tasks_in_states({TaskState::Queued, TaskState::Running}); });
  EXPECT_EQ(ids_of(tasks), (std::vector<std::string>{"t-1", "t-0", "t-3"}));
  EXPECT_TRUE(read([](Tx& tx) { return tx.tasks_in_states({}); }).empty());
}

TEST_P(StoreTest, TasksOfPipelineAndCountsByResourceGroupAndState) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-1", kT0 + 1, TaskState::Queued, "pg-a", "rg-x")));
    CP_TRY(tx.insert_task(make_task("t-2", kT0 + 2, TaskState::Queued, "pg-a", "rg-x")));
    CP_TRY(tx.insert_task(make_task("t-3", kT0 + 3, TaskState::Running, "pg-a", "rg-x")));
    Task other = make_task("t-4", kT0 + 4, TaskState::Queued, "pg-b", "rg-y");
    other.pipeline_id = "p-2";
    return tx.insert_task(other);
  });
  EXPECT_EQ(ids_of(read([](Tx& tx) { return tx.tasks_of_pipeline("p-1"); })),
            (std::vector<std::string>{"t-1", "t-2", "t-3"}));

  auto counts = read([](Tx& tx) { return tx.count_tasks(); });
  std::sort(counts.begin(), counts.end());
  using Row = std::tuple<std::string, TaskState, std::int64_t>;
  EXPECT_EQ(counts, (std::vector<Row>{Row{"rg-x", TaskState::Queued, 2}, Row{"rg-x", TaskState::Running, 1},
                                      Row{"rg-y", TaskState::Queued, 1}}));
}

// ------------------------------------------------------------- attempts

TEST_P(StoreTest, AttemptsRoundTripAndListByNumber) {
  Attempt a2 = make_attempt("t-1", 2, "c-east", AttemptState::Running);
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_attempt(a2));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Preempted)));
    return tx.insert_attempt(make_attempt("t-9", 1, "c-east", AttemptState::Running));
  });
  auto got = read([](Tx& tx) { return tx.get_attempt("t-1.2"); });
  ASSERT_TRUE(got.has_value());
  expect_same(a2, *got);

  auto attempts = read([](Tx& tx) { return tx.attempts_of_task("t-1"); });
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].number, 1);
  EXPECT_EQ(attempts[1].number, 2);

  EXPECT_EQ(write_error([&](Tx& tx) { return tx.insert_attempt(a2); }).code, "already_exists");
  EXPECT_EQ(write_error([](Tx& tx) { return tx.update_attempt(make_attempt("t-7", 1, "c", AttemptState::Running)); })
                .code,
            "not_found");
}

TEST_P(StoreTest, TasksAndAttemptsByIdsReturnThoseThatExistAcrossBatches) {
  // More ids than one statement takes, an id that JSON must escape, and an
  // id that does not exist.
  const std::string odd = "t-\"odd\"\\id";
  Task odd_task = make_task(odd, kT0);
  write([&](Tx& tx) -> Status {
    for (int i = 0; i < 1205; ++i) CP_TRY(tx.insert_task(make_task(task_id(i), kT0 + i)));
    CP_TRY(tx.insert_task(odd_task));
    CP_TRY(tx.insert_attempt(make_attempt("t-0001", 1, "c-east", AttemptState::Running)));
    return tx.insert_attempt(make_attempt(odd, 1, "c-east", AttemptState::Running));
  });
  std::vector<std::string> ask;
  std::vector<std::string> expected;
  for (int i = 0; i < 1205; ++i) {
    ask.push_back(task_id(i));
    expected.push_back(task_id(i));
  }
  ask.push_back("t-missing");
  ask.push_back(odd);
  expected.push_back(odd);
  auto tasks = read([&](Tx& tx) { return tx.get_tasks(ask); });
  auto ids = ids_of(tasks);
  std::sort(ids.begin(), ids.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  auto odd_read = std::find_if(tasks.begin(), tasks.end(), [&](const Task& t) { return t.id == odd; });
  ASSERT_NE(odd_read, tasks.end());
  expect_same(odd_task, *odd_read);
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_tasks({}); }).empty());

  auto attempts = read([&](Tx& tx) { return tx.get_attempts({odd + ".1", "t-0001.1", "t-0002.1"}); });
  std::vector<std::string> attempt_ids;
  for (const auto& a : attempts) attempt_ids.push_back(a.id);
  std::vector<std::string> expected_attempts{"t-0001.1", odd + ".1"};
  std::sort(attempt_ids.begin(), attempt_ids.end());
  std::sort(expected_attempts.begin(), expected_attempts.end());
  EXPECT_EQ(attempt_ids, expected_attempts);
}

TEST_P(StoreTest, HeldWritesAreReadBackInTheirBodyAndCommitInOrder) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-1", kT0)));
    return tx.insert_task(make_task("t-2", kT0));
  });
  Task t1 = make_task("t-1", kT0, TaskState::Dispatched);
  t1.assigned_cluster = "c-east";
  write([&](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Dispatched)));
    CP_TRY(tx.update_task(make_task("t-1", kT0, TaskState::Admitted)));
    CP_TRY(tx.update_task(t1));  // the later update of one task wins
    CP_TRY(tx.update_task(make_task("t-2", kT0, TaskState::Admitted)));
    for (int i = 0; i < 3; ++i) {
      CP_TRY(tx.append_event(make_event("task", "t-1", kT0 + 10 - i, "step-" + std::to_string(i))));
    }
    // Read back inside the body.
    CP_ASSIGN(auto a, tx.get_attempt("t-1.1"));
    if (!a) return Error{"test", 500, "held attempt not read back", "", {}};
    CP_ASSIGN(auto t, tx.get_task("t-1"));
    if (!t || t->state != TaskState::Dispatched) return Error{"test", 500, "held update not read back", "", {}};
    // And more held rows after the read: sent before COMMIT.
    CP_TRY(tx.append_event(make_event("task", "t-2", kT0, "step-3")));
    return {};
  });
  auto got = read([](Tx& tx) { return tx.get_task("t-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(t1, *got);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-2"); })->state, TaskState::Admitted);
  ASSERT_TRUE(read([](Tx& tx) { return tx.get_attempt("t-1.1"); }).has_value());
  EventQuery q;
  q.limit = 10;
  auto events = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(events.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(events[i].type, "step-" + std::to_string(i));  // ids in the order written, not by time
    if (i > 0) {
      EXPECT_GT(events[i].id, events[i - 1].id);
    }
  }
  EXPECT_EQ(events[3].object_id, "t-2");
}

TEST_P(StoreTest, AHeldWriteThatFailsFailsItsWholeBody) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-1", kT0)));
    return tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Running));
  });
  // An attempt that exists: already_exists, from the insert or later.
  Error e = write_error([](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.update_task(make_task("t-1", kT0, TaskState::Running)));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 2, "c-east", AttemptState::Running)));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Running)));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0, "never")));
    return {};
  });
  EXPECT_EQ(e.code, "already_exists");
  EXPECT_NE(e.message.find("t-1.1"), std::string::npos) << e.message;
  // A task that does not exist: not_found.
  e = write_error([](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.update_task(make_task("t-1", kT0, TaskState::Running)));
    return tx.update_task(make_task("t-404", kT0, TaskState::Running));
  });
  EXPECT_EQ(e.code, "not_found");
  EXPECT_NE(e.message.find("t-404"), std::string::npos) << e.message;
  // Nothing of either body was kept.
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-1"); })->state, TaskState::Queued);
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_attempt("t-1.2"); }).has_value());
  EventQuery q;
  EXPECT_TRUE(read([&](Tx& tx) { return tx.list_events(q); }).empty());
}

TEST_P(StoreTest, AHeldInsertOfAnExistingRowFailsItsBodyEvenAsTheLastWrite) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_pipeline(make_pipeline("p-1", "pg-a")));
    return tx.insert_task(make_task("t-1", kT0));
  });
  // Nothing is read after the conflicting insert: on PostgreSQL it goes to
  // the server with COMMIT, which must then not happen.
  Error e = write_error([](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.insert_pipeline(make_pipeline("p-2", "pg-a")));
    CP_TRY(tx.insert_task(make_task("t-2", kT0)));
    CP_TRY(tx.append_event(make_event("task", "t-2", kT0, "task.state")));
    CP_TRY(tx.insert_task(make_task("t-1", kT0)));
    AuditEntry a;
    a.id = "audit-1";
    a.at = kT0;
    a.user = "alice";
    return tx.append_audit(a);
  });
  EXPECT_EQ(e.code, "already_exists");
  EXPECT_NE(e.message.find("t-1"), std::string::npos) << e.message;
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_pipeline("p-2"); }).has_value());
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_task("t-2"); }).has_value());
  EventQuery q;
  EXPECT_TRUE(read([&](Tx& tx) { return tx.list_events(q); }).empty());
  AuditQuery aq;
  EXPECT_TRUE(read([&](Tx& tx) { return tx.list_audit(aq); }).items.empty());
  // A held audit entry whose id exists is already_exists too.
  write([](Tx& tx) -> Status {
    AuditEntry a;
    a.id = "audit-1";
    a.at = kT0;
    return tx.append_audit(a);
  });
  e = write_error([](Tx& tx) -> Status {
    tx.hold_writes();
    AuditEntry a;
    a.id = "audit-1";
    a.at = kT0;
    return tx.append_audit(a);
  });
  EXPECT_NE(e.status, 200);
}

TEST_P(StoreTest, ActiveAttemptsAreTheNonTerminalOnesPerClusterOrAll) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Dispatched)));
    CP_TRY(tx.insert_attempt(make_attempt("t-2", 1, "c-east", AttemptState::Running)));
    CP_TRY(tx.insert_attempt(make_attempt("t-3", 1, "c-east", AttemptState::Stopping)));
    CP_TRY(tx.insert_attempt(make_attempt("t-4", 1, "c-east", AttemptState::Succeeded)));
    CP_TRY(tx.insert_attempt(make_attempt("t-5", 1, "c-east", AttemptState::Lost)));
    CP_TRY(tx.insert_attempt(make_attempt("t-7", 1, "c-east", AttemptState::Unknown)));
    return tx.insert_attempt(make_attempt("t-6", 1, "c-west", AttemptState::Running));
  });
  auto ids = [](const std::vector<Attempt>& as) {
    std::vector<std::string> out;
    for (const auto& a : as) out.push_back(a.id);
    std::sort(out.begin(), out.end());
    return out;
  };
  using V = std::vector<std::string>;
  // Unknown is live: its job may still run.
  EXPECT_EQ(ids(read([](Tx& tx) { return tx.active_attempts("c-east"); })), (V{"t-1.1", "t-2.1", "t-3.1", "t-7.1"}));
  EXPECT_EQ(ids(read([](Tx& tx) { return tx.active_attempts(""); })),
            (V{"t-1.1", "t-2.1", "t-3.1", "t-6.1", "t-7.1"}));

  // Finishing an attempt takes it out.
  write([](Tx& tx) { return tx.update_attempt(make_attempt("t-2", 1, "c-east", AttemptState::Failed)); });
  EXPECT_EQ(ids(read([](Tx& tx) { return tx.active_attempts("c-east"); })), (V{"t-1.1", "t-3.1", "t-7.1"}));
  EXPECT_EQ(read([](Tx& tx) { return tx.get_attempt("t-2.1"); })->state, AttemptState::Failed);
}

TEST_P(StoreTest, AttemptsInAStateOfTheClustersNamed) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Unknown)));
    CP_TRY(tx.insert_attempt(make_attempt("t-2", 1, "c-east", AttemptState::Running)));
    CP_TRY(tx.insert_attempt(make_attempt("t-3", 1, "c-west", AttemptState::Unknown)));
    CP_TRY(tx.insert_attempt(make_attempt("t-0", 1, "c-west", AttemptState::Unknown)));
    return tx.insert_attempt(make_attempt("t-4", 1, "c-north", AttemptState::Unknown));
  });
  auto ids = [](const std::vector<Attempt>& as) {
    std::vector<std::string> out;
    for (const auto& a : as) out.push_back(a.id);
    return out;
  };
  using V = std::vector<std::string>;
  // By cluster, then id; only the clusters named.
  EXPECT_EQ(ids(read([](Tx& tx) { return tx.attempts_in_state(AttemptState::Unknown, {"c-west", "c-east"}); })),
            (V{"t-1.1", "t-0.1", "t-3.1"}));
  EXPECT_EQ(ids(read([](Tx& tx) { return tx.attempts_in_state(AttemptState::Running, {"c-east", "c-west"}); })),
            (V{"t-2.1"}));
  EXPECT_TRUE(ids(read([](Tx& tx) { return tx.attempts_in_state(AttemptState::Unknown, {}); })).empty());
  EXPECT_TRUE(ids(read([](Tx& tx) { return tx.attempts_in_state(AttemptState::Lost, {"c-east"}); })).empty());
}

// --------------------------------------------------------------- events

TEST_P(StoreTest, EventsGetIncreasingIdsAndListAscending) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    write([&](Tx& tx) -> Status {
      std::string object = i % 2 == 0 ? "t-even" : "t-odd";
      CP_ASSIGN(auto id, tx.append_event(make_event("task", object, kT0 + i, "task.state")));
      ids.push_back(id);
      return {};
    });
  }
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto id, tx.append_event(make_event("cluster", "t-even", kT0 + 9, "cluster.state")));
    ids.push_back(id);
    return {};
  });
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());

  auto all = read([](Tx& tx) { return tx.list_events(EventQuery{}); });
  ASSERT_EQ(all.size(), 6u);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, ids[i]);
  Event expected = make_event("task", "t-even", kT0, "task.state");
  expected.id = ids[0];
  expect_same(expected, all[0]);

  EventQuery q;
  q.object_kind = "task";
  q.object_id = "t-even";
  auto even = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(even.size(), 3u);
  EXPECT_EQ(even[0].id, ids[0]);
  EXPECT_EQ(even[2].id, ids[4]);

  q = {};
  q.object_id = "t-even";  // either kind
  EXPECT_EQ(read([&](Tx& tx) { return tx.list_events(q); }).size(), 4u);

  q = {};
  q.after_id = ids[1];
  q.limit = 2;
  auto tail = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].id, ids[2]);
  EXPECT_EQ(tail[1].id, ids[3]);
}

TEST_P(StoreTest, EventsAppendedInOneTransactionKeepTheirOrder) {
  write([](Tx& tx) -> Status {
    for (int i = 0; i < 10; ++i) CP_TRY(tx.append_event(make_event("task", "t-1", kT0, "step-" + std::to_string(i))));
    return {};
  });
  auto all = read([](Tx& tx) { return tx.list_events(EventQuery{}); });
  ASSERT_EQ(all.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(all[i].type, "step-" + std::to_string(i));
}

}  // namespace
}  // namespace cp::testing
