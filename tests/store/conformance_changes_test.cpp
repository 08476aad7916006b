// Conformance: the change journal (store/change_journal.h). Every write()
// publishes the task and attempt ids it wrote before it returns; reads
// publish nothing.
#include <algorithm>
#include <thread>

#include "store_conformance.h"

namespace cp::testing {
namespace {

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST_P(StoreTest, AWritePublishesTheTaskAndAttemptIdsItWroteBeforeItReturns) {
  ChangeJournal* journal = store_->changes();
  ASSERT_NE(journal, nullptr);
  ChangedRows drained;
  (void)journal->take(journal->last(), drained);  // whatever migrate() or set-up did

  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-1", 1000)));
    CP_TRY(tx.insert_task(make_task("t-2", 1000)));
    return tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Dispatched));
  });
  write([](Tx& tx) -> Status {
    Task t = make_task("t-2", 1000, TaskState::Running);
    CP_TRY(tx.update_task(t));
    Attempt a = make_attempt("t-1", 1, "c-east", AttemptState::Running);
    return tx.update_attempt(a);
  });
  write([](Tx& tx) { return tx.set_meta("k", "v"); });  // no task nor attempt
  (void)read([](Tx& tx) { return tx.get_task("t-1"); });

  ChangedRows got;
  EXPECT_TRUE(journal->take(journal->last(), got));
  EXPECT_EQ(sorted(got.tasks), (std::vector<std::string>{"t-1", "t-2", "t-2"}));
  EXPECT_EQ(got.attempts, (std::vector<std::string>{"t-1.1", "t-1.1"}));
  ChangedRows again;
  EXPECT_TRUE(journal->take(journal->last(), again));
  EXPECT_TRUE(again.empty());  // taken once
}

TEST_P(StoreTest, AWriteKeepsCopiesOfItsRowsAndItsEntryCanBeForgotten) {
  ChangeJournal* journal = store_->changes();
  ASSERT_NE(journal, nullptr);
  write([](Tx& tx) { return tx.insert_task(make_task("t-old", 1000)); });
  ChangedRows drained;
  (void)journal->take(journal->last(), drained);

  WrittenRows kept;
  kept.writer = journal->new_writer();
  write([&](Tx& tx) -> Status {
    kept.clear();
    tx.keep_written(&kept);
    CP_TRY(tx.insert_task(make_task("t-1", 1000)));
    CP_TRY(tx.update_task(make_task("t-1", 1000, TaskState::Dispatched)));
    CP_TRY(tx.insert_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Dispatched)));
    return tx.update_attempt(make_attempt("t-1", 1, "c-east", AttemptState::Running));
  });
  ASSERT_EQ(kept.tasks.size(), 2u);  // every version, in the order written
  EXPECT_EQ(kept.tasks[0].state, TaskState::Queued);
  EXPECT_EQ(kept.tasks[1].state, TaskState::Dispatched);
  ASSERT_EQ(kept.attempts.size(), 2u);
  EXPECT_EQ(kept.attempts[1].state, AttemptState::Running);
  EXPECT_TRUE(kept.complete);
  // Another writer's entry, after it, names t-1 too.
  write([](Tx& tx) { return tx.update_task(make_task("t-1", 1000, TaskState::Running)); });

  journal->forget(kept.writer);
  ChangedRows got;
  EXPECT_TRUE(journal->take(journal->last(), got));
  EXPECT_EQ(got.tasks, (std::vector<std::string>{"t-1"}));  // the other writer's only
  EXPECT_TRUE(got.attempts.empty());

  // A deleted row cannot be copied: the copy says it is not complete.
  WrittenRows deleting;
  write([&](Tx& tx) -> Status {
    tx.keep_written(&deleting);
    return tx.delete_task("t-old");
  });
  EXPECT_FALSE(deleting.complete);
}

TEST_P(StoreTest, ConcurrentWritersEachPublishTheirIds) {
  ChangeJournal* journal = store_->changes();
  ASSERT_NE(journal, nullptr);
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kEach; ++i) {
        const std::string id = "t-" + std::to_string(w) + "-" + std::to_string(i);
        EXPECT_OK(store_->write([&](Tx& tx) { return tx.insert_task(make_task(id, 1000)); }));
      }
    });
  }
  for (auto& t : threads) t.join();
  ChangedRows got;
  EXPECT_TRUE(journal->take(journal->last(), got));
  std::vector<std::string> want;
  for (int w = 0; w < kThreads; ++w) {
    for (int i = 0; i < kEach; ++i) want.push_back("t-" + std::to_string(w) + "-" + std::to_string(i));
  }
  EXPECT_EQ(sorted(got.tasks), sorted(want));
}

TEST_P(StoreTest, ARolledBackWriteMayPublishItsIdsButChangesNothing) {
  // Published either way (a COMMIT with a lost connection may have committed);
  // a reader that reads those rows again finds the truth.
  ChangeJournal* journal = store_->changes();
  ASSERT_NE(journal, nullptr);
  EXPECT_FALSE(store_->write([](Tx& tx) -> Status {
                       CP_TRY(tx.insert_task(make_task("t-gone", 1000)));
                       return Error{"refused", 409, "no", "不", {}};
                     })
                   .ok());
  ChangedRows got;
  EXPECT_TRUE(journal->take(journal->last(), got));
  for (const auto& id : got.tasks) EXPECT_EQ(id, "t-gone");
  EXPECT_EQ(read([](Tx& tx) { return tx.get_task("t-gone"); }), std::nullopt);
}

TEST_P(StoreTest, OnlyOneWriterThatPublishesBeforeTheNextHasACurrentJournal) {
  // Tx::journal_is_current: SQLite's one writer publishes each group before
  // the next begins; PostgreSQL's concurrent writers publish after COMMIT.
  const bool want = store_->backend() == "sqlite";
  write([&](Tx& tx) -> Status {
    EXPECT_EQ(tx.journal_is_current(), want);
    EXPECT_FALSE(tx.wrote_task("t-1"));
    CP_TRY(tx.insert_task(make_task("t-1", 1000)));
    EXPECT_TRUE(tx.wrote_task("t-1"));  // either way: its own writes
    return {};
  });
  write([](Tx& tx) -> Status {
    EXPECT_FALSE(tx.wrote_task("t-1"));  // an earlier transaction's
    return {};
  });
  (void)read([](Tx& tx) {
    EXPECT_FALSE(tx.journal_is_current());
    return tx.get_task("t-1");
  });
}

TEST(ChangeJournalTest, DropsTheOldestPastItsBoundAndSaysSo) {
  ChangeJournal journal(3);
  journal.publish(ChangedRows{{"a", "b"}, {}});
  journal.publish(ChangedRows{{"c"}, {"c.1"}});  // 4 ids: "a", "b" dropped
  ChangedRows got;
  EXPECT_FALSE(journal.take(journal.last(), got));
  EXPECT_EQ(got.tasks, (std::vector<std::string>{"c"}));
  EXPECT_EQ(got.attempts, (std::vector<std::string>{"c.1"}));
  journal.publish(ChangedRows{{"d"}, {}});
  ChangedRows next;
  EXPECT_TRUE(journal.take(journal.last(), next));  // complete again
  EXPECT_EQ(next.tasks, (std::vector<std::string>{"d"}));
}

TEST(ChangeJournalTest, ForgetsOnlyTheEntriesOfOneWriter) {
  ChangeJournal journal(10);
  const auto mine = journal.new_writer();
  EXPECT_NE(journal.new_writer(), mine);
  journal.publish(ChangedRows{{"a"}, {}, 0});
  journal.publish(ChangedRows{{"b", "c"}, {"b.1"}, mine});
  journal.publish(ChangedRows{{"c"}, {}, 0});
  journal.forget(mine);
  journal.forget(0);  // unmarked entries are never forgotten
  ChangedRows got;
  EXPECT_TRUE(journal.take(journal.last(), got));
  EXPECT_EQ(got.tasks, (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(got.attempts.empty());
  // Its ids no longer count against the bound.
  journal.publish(ChangedRows{std::vector<std::string>(10, "d"), {}, 0});
  ChangedRows full;
  EXPECT_TRUE(journal.take(journal.last(), full));
}

TEST(ChangeJournalTest, TakesOnlyUpToTheMark) {
  ChangeJournal journal;
  journal.publish(ChangedRows{{"a"}, {}});
  const auto mark = journal.last();
  journal.publish(ChangedRows{{"b"}, {}});
  ChangedRows got;
  EXPECT_TRUE(journal.take(mark, got));
  EXPECT_EQ(got.tasks, (std::vector<std::string>{"a"}));
  ChangedRows rest;
  EXPECT_TRUE(journal.take(journal.last(), rest));
  EXPECT_EQ(rest.tasks, (std::vector<std::string>{"b"}));
}

}  // namespace
}  // namespace cp::testing
