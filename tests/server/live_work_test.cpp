#include "server/live_work.h"

#include <gtest/gtest.h>

#include "store/store.h"

namespace cp {
namespace {

Task task(const std::string& id, TaskState state, Millis created_at = 1000) {
  Task t;
  t.id = id;
  t.pipeline_id = "p-1";
  t.name = id;
  t.project_group = "pa";
  t.resource_group = "rg-a";
  t.state = state;
  t.created_at = t.updated_at = created_at;
  return t;
}

Attempt attempt(const std::string& task_id, AttemptState state, const std::string& cluster = "c1") {
  Attempt a;
  a.id = task_id + ".1";
  a.task_id = task_id;
  a.number = 1;
  a.epoch = 1;
  a.cluster_id = cluster;
  a.state = state;
  return a;
}

class LiveWorkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
  }
  void write(const std::function<Status(Tx&)>& body) { ASSERT_TRUE(store_->write(body).ok()); }
  void refresh(Millis now = 10'000) {
    const auto mark = LiveWork::mark(*store_);
    ASSERT_TRUE(store_->read([&](Tx& tx) { return live_.refresh(tx, store_->changes(), mark, now); }).ok());
  }
  std::vector<std::string> queued_ids() const {
    std::vector<std::string> out;
    for (const Task* t : live_.queued()) out.push_back(t->id);
    return out;
  }
  std::vector<std::string> attempt_ids() const {
    std::vector<std::string> out;
    for (const Attempt* a : live_.attempts()) out.push_back(a->id);
    return out;
  }

  std::unique_ptr<Store> store_;
  LiveWork live_;
};

TEST_F(LiveWorkTest, ReadsEverythingFirstThenOnlyWhatChanged) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-b", TaskState::Queued, 2000)));
    CP_TRY(tx.insert_task(task("t-a", TaskState::Queued, 2000)));
    CP_TRY(tx.insert_task(task("t-old", TaskState::Queued, 1000)));
    return tx.insert_task(task("t-done", TaskState::Succeeded));
  });
  refresh();
  EXPECT_EQ(live_.stats().full_reads, 1);
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-old", "t-a", "t-b"}));  // by (created_at, id)
  EXPECT_EQ(live_.task("t-done"), nullptr);

  // t-a placed: its task and its new attempt are the only rows read again.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.update_task(task("t-a", TaskState::Dispatched, 2000)));
    return tx.insert_attempt(attempt("t-a", AttemptState::Dispatched));
  });
  refresh();
  EXPECT_EQ(live_.stats().full_reads, 1);
  EXPECT_EQ(live_.stats().rows_read, 2);
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-old", "t-b"}));
  EXPECT_EQ(attempt_ids(), (std::vector<std::string>{"t-a.1"}));
  ASSERT_NE(live_.task("t-a"), nullptr);
  EXPECT_EQ(live_.task("t-a")->state, TaskState::Dispatched);

  // It ends: both leave the live work.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.update_task(task("t-a", TaskState::Succeeded, 2000)));
    return tx.update_attempt(attempt("t-a", AttemptState::Succeeded));
  });
  refresh();
  EXPECT_TRUE(attempt_ids().empty());
  EXPECT_EQ(live_.task("t-a"), nullptr);

  // Nothing changed: nothing read.
  refresh();
  EXPECT_EQ(live_.stats().rows_read, 0);
  EXPECT_EQ(live_.stats().full_reads, 1);
}

TEST_F(LiveWorkTest, TheQueuedOrderFollowsEveryChangeWithoutRepeats) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-1", TaskState::Queued, 1000)));
    CP_TRY(tx.insert_task(task("t-2", TaskState::Queued, 2000)));
    return tx.insert_task(task("t-3", TaskState::Running, 500));
  });
  refresh();
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-1", "t-2"}));
  // Updated while queued (its reasons), twice in one write: listed once.
  write([](Tx& tx) -> Status {
    Task t = task("t-2", TaskState::Queued, 2000);
    t.reasons = {PendingReason{"quota_exceeded", "short", "不足", {}}};
    CP_TRY(tx.update_task(t));
    return tx.update_task(t);
  });
  refresh();
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-1", "t-2"}));
  ASSERT_EQ(live_.queued().back()->reasons.size(), 1u);  // the copy listed is the one read
  // t-3 requeued (preempted), t-1 placed: t-3 comes first by its age.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.update_task(task("t-3", TaskState::Queued, 500)));
    return tx.update_task(task("t-1", TaskState::Dispatched, 1000));
  });
  refresh();
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-3", "t-2"}));
  // Ended: gone from the order.
  write([](Tx& tx) { return tx.update_task(task("t-2", TaskState::Cancelled, 2000)); });
  refresh();
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-3"}));
  // A full read rebuilds the same order.
  refresh(10'000 + LiveWork::kFullReadEveryMs);
  EXPECT_EQ(live_.stats().full_reads, 2);
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-3"}));
}

TEST_F(LiveWorkTest, KeepsWhatActiveAttemptsHoldPerGroupAndNode) {
  // The apply's re-check reads these sums instead of every attempt.
  auto gang = [](AttemptState state) {
    Attempt a = attempt("t-gang", state);
    a.resources.set("cpu", 2000);
    a.resources.set("gpu/a100", 1);
    a.placements = {{0, "n1", {0}}, {1, "n2", {3}}};
    return a;
  };
  write([&](Tx& tx) -> Status {
    Task t = task("t-gang", TaskState::Dispatched);
    t.resource_group = "rg-b";
    CP_TRY(tx.insert_task(t));
    CP_TRY(tx.insert_task(task("t-one", TaskState::Dispatched)));  // rg-a
    CP_TRY(tx.insert_attempt(gang(AttemptState::Dispatched)));
    Attempt one = attempt("t-one", AttemptState::Dispatched);
    one.resources.set("cpu", 500);
    one.placements = {{0, "n1", {}}};
    return tx.insert_attempt(one);
  });
  refresh();
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.group_use().at("rg-b").get("gpu/a100"), 2);  // per replica x 2 replicas
  EXPECT_EQ(live_.group_use().at("rg-b").get("cpu"), 4000);
  EXPECT_EQ(live_.group_use().at("rg-a").get("cpu"), 500);
  ASSERT_NE(live_.node_use("c1", "n1"), nullptr);
  EXPECT_EQ(live_.node_use("c1", "n1")->used.get("cpu"), 2500);
  EXPECT_EQ(live_.node_use("c1", "n1")->gpus, (std::multiset<int>{0}));
  EXPECT_EQ(live_.node_use("c1", "n2")->gpus, (std::multiset<int>{3}));
  EXPECT_EQ(live_.node_use("c1", "n3"), nullptr);
  EXPECT_TRUE(live_.ungrouped_attempts().empty());

  // Running now: charged once, not twice.
  write([&](Tx& tx) { return tx.update_attempt(gang(AttemptState::Running)); });
  refresh();
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.group_use().at("rg-b").get("cpu"), 4000);
  EXPECT_EQ(live_.node_use("c1", "n2")->gpus, (std::multiset<int>{3}));

  // It ends: nothing held any more.
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.update_task(task("t-gang", TaskState::Succeeded)));
    return tx.update_attempt(gang(AttemptState::Succeeded));
  });
  refresh();
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.group_use().at("rg-b").get("cpu"), 0);
  EXPECT_TRUE(live_.node_use("c1", "n2")->gpus.empty());
  EXPECT_EQ(live_.node_use("c1", "n1")->used.get("cpu"), 500);

  // An active attempt whose task is not live has no group here: listed.
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-odd", TaskState::Failed)));
    return tx.insert_attempt(attempt("t-odd", AttemptState::Running));
  });
  refresh();
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.ungrouped_attempts(), (std::set<std::string>{"t-odd.1"}));

  // A full read counts the same.
  const auto before = live_.group_use().at("rg-a").get("cpu");
  refresh(10'000 + LiveWork::kFullReadEveryMs);
  EXPECT_EQ(live_.stats().full_reads, 2);
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.group_use().at("rg-a").get("cpu"), before);
  EXPECT_EQ(live_.ungrouped_attempts(), (std::set<std::string>{"t-odd.1"}));
}

TEST_F(LiveWorkTest, AWriteAfterTheMarkIsReadByTheNextRefresh) {
  refresh();
  const auto mark = LiveWork::mark(*store_);
  write([](Tx& tx) { return tx.insert_task(task("t-late", TaskState::Queued)); });
  // This read may or may not see it; the next must.
  ASSERT_TRUE(store_->read([&](Tx& tx) { return live_.refresh(tx, store_->changes(), mark, 10'000); }).ok());
  refresh();
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-late"}));
}

TEST_F(LiveWorkTest, RowsAWriteKeptAreAppliedWithoutBeingReadBack) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(task("t-a", TaskState::Queued, 1000)));
    return tx.insert_task(task("t-b", TaskState::Queued, 2000));
  });
  refresh();
  (void)live_.take_touched();
  ChangeJournal* journal = store_->changes();

  // t-a placed by a write that keeps its rows, as the scheduler's apply does.
  WrittenRows kept;
  kept.writer = journal->new_writer();
  write([&](Tx& tx) -> Status {
    kept.clear();
    tx.keep_written(&kept);
    CP_TRY(tx.update_task(task("t-a", TaskState::Dispatched, 1000)));
    Attempt a = attempt("t-a", AttemptState::Dispatched);
    a.resources.set("cpu", 500);
    a.placements = {{0, "n1", {}}};
    return tx.insert_attempt(a);
  });
  live_.apply(kept);
  journal->forget(kept.writer);
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-b"}));
  EXPECT_EQ(attempt_ids(), (std::vector<std::string>{"t-a.1"}));
  EXPECT_EQ(live_.group_use().at("rg-a").get("cpu"), 500);
  ASSERT_NE(live_.node_use("c1", "n1"), nullptr);
  EXPECT_EQ(live_.node_use("c1", "n1")->used.get("cpu"), 500);
  const auto touched = live_.take_touched();  // the kept scheduler hears of them as after a read
  EXPECT_FALSE(touched.everything);
  EXPECT_EQ(touched.tasks, (std::vector<std::string>{"t-a"}));
  EXPECT_EQ(touched.attempts, (std::vector<std::string>{"t-a.1"}));
  std::string diff = "unread";
  ASSERT_TRUE(store_->read([&](Tx& tx) -> Status {
                      CP_ASSIGN(diff, live_.check_rows(tx, kept));
                      return {};
                    })
                  .ok());
  EXPECT_EQ(diff, "");
  refresh();
  EXPECT_EQ(live_.stats().rows_read, 0);  // nothing to read back
  EXPECT_EQ(live_.check_sums(), "");

  // Another writer changes the row after a kept write: its entry makes the
  // next refresh read the row, whatever the kept copy said.
  WrittenRows second;
  second.writer = journal->new_writer();
  write([&](Tx& tx) -> Status {
    second.clear();
    tx.keep_written(&second);
    Attempt a = attempt("t-a", AttemptState::Running);
    a.resources.set("cpu", 500);
    a.placements = {{0, "n1", {}}};
    return tx.update_attempt(a);
  });
  write([](Tx& tx) -> Status {
    CP_TRY(tx.update_task(task("t-a", TaskState::Succeeded, 1000)));
    return tx.update_attempt(attempt("t-a", AttemptState::Succeeded));
  });
  live_.apply(std::move(second));  // moved in, as the apply does unless it checks them
  EXPECT_TRUE(second.tasks.empty() && second.attempts.empty());
  journal->forget(second.writer);
  ASSERT_NE(live_.attempt("t-a.1"), nullptr);
  EXPECT_EQ(live_.attempt("t-a.1")->state, AttemptState::Running);
  refresh();
  EXPECT_EQ(live_.stats().rows_read, 2);  // the other writer's rows, read back: both ended
  EXPECT_EQ(live_.attempt("t-a.1"), nullptr);
  EXPECT_EQ(live_.task("t-a"), nullptr);
  EXPECT_TRUE(attempt_ids().empty());
  EXPECT_EQ(live_.check_sums(), "");
  EXPECT_EQ(live_.group_use().at("rg-a").get("cpu"), 0);
}

TEST_F(LiveWorkTest, ReadsEverythingAgainPeriodically) {
  refresh(10'000);
  EXPECT_EQ(live_.stats().full_reads, 1);
  refresh(10'000 + LiveWork::kFullReadEveryMs - 1);
  EXPECT_EQ(live_.stats().full_reads, 1);
  refresh(10'000 + LiveWork::kFullReadEveryMs);
  EXPECT_EQ(live_.stats().full_reads, 2);
  // Not when told not to (inside the apply's write transaction).
  const Millis later = 10'000 + 3 * LiveWork::kFullReadEveryMs;
  ASSERT_TRUE(store_->write([&](Tx& tx) {
                      return live_.refresh(tx, store_->changes(), LiveWork::mark(*store_), later, false);
                    })
                  .ok());
  EXPECT_EQ(live_.stats().full_reads, 2);
}

TEST_F(LiveWorkTest, WithoutAJournalEveryRefreshReadsEverything) {
  write([](Tx& tx) { return tx.insert_task(task("t-1", TaskState::Queued)); });
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->read([&](Tx& tx) { return live_.refresh(tx, nullptr, 0, 10'000); }).ok());
  }
  EXPECT_EQ(live_.stats().full_reads, 3);
  EXPECT_EQ(queued_ids(), (std::vector<std::string>{"t-1"}));
}

}  // namespace
}  // namespace cp
