// Conformance: transaction rules, concurrency and durability.
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "store/migrations.h"
#include "store_conformance.h"

namespace cp::testing {
namespace {

// Increments the integer in meta[key] by one: a read-modify-write that loses
// updates unless transactions are serialized.
Status increment(Tx& tx, const std::string& key) {
  CP_ASSIGN(auto value, tx.get_meta(key));
  int n = value ? std::stoi(*value) : 0;
  return tx.set_meta(key, std::to_string(n + 1));
}

TEST_P(StoreTest, ABodyThatThrowsRollsBackAndTheStoreStaysUsable) {
  EXPECT_THROW((void)store_->write([](Tx& tx) -> Status {
    CP_TRY(tx.set_meta("k", "v"));
    throw std::runtime_error("bug in a handler");
  }),
               std::runtime_error);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("k"); }), std::nullopt);
  write([](Tx& tx) { return tx.set_meta("k", "after"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("k"); }), std::optional<std::string>("after"));
}

TEST_P(StoreTest, WritesInsideReadAreRefused) {
  Error e = read_error([](Tx& tx) { return tx.set_meta("k", "v"); });
  EXPECT_EQ(e.code, "store_error");
  EXPECT_EQ(e.status, 500);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("k"); }), std::nullopt);
}

TEST_P(StoreTest, ReadSeesOneSnapshotOfCommittedWrites) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-1", kT0)));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0, "task.created")));
    return {};
  });
  Status s = store_->read([](Tx& tx) -> Status {
    CP_ASSIGN(auto task, tx.get_task("t-1"));
    CP_ASSIGN(auto events, tx.list_events(EventQuery{}));
    EXPECT_TRUE(task.has_value());
    EXPECT_EQ(events.size(), 1u);
    return {};
  });
  EXPECT_OK(s);
}

TEST_P(StoreTest, TwoThreadsWriting200TimesEachLoseNoUpdate) {
  constexpr int kWrites = 200;
  auto worker = [&](const std::string& name) {
    for (int i = 0; i < kWrites; ++i) {
      Status s = store_->write([&](Tx& tx) -> Status {
        CP_TRY(increment(tx, "counter"));
        CP_TRY(tx.insert_task(make_task(name + "-" + std::to_string(i), kT0 + i)));
        CP_TRY(tx.append_event(make_event("task", name, kT0 + i, "task.created")));
        return {};
      });
      EXPECT_TRUE(s.ok()) << s.error().to_string();
    }
  };
  std::thread a(worker, "a");
  std::thread b(worker, "b");
  a.join();
  b.join();

  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("counter"); }), std::optional<std::string>("400"));
  EXPECT_EQ(read([](Tx& tx) { return tx.tasks_in_states({TaskState::Queued}); }).size(), 2u * kWrites);
  EventQuery q;
  q.limit = 1000;
  auto events = read([&](Tx& tx) { return tx.list_events(q); });
  ASSERT_EQ(events.size(), 2u * kWrites);
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_LT(events[i - 1].id, events[i].id);
}

TEST_P(StoreTest, ConcurrentWritesKeepExactlyTheBodiesThatSucceeded) {
  // Eight threads write at once (SQLite commits them in groups): every third
  // body fails after writing and every tenth throws; each caller gets its own
  // body's outcome, and only the writes of the bodies that succeeded remain.
  constexpr int kThreads = 8, kWrites = 60;
  std::atomic<int> succeeded{0};
  auto worker = [&](int thread) {
    for (int i = 0; i < kWrites; ++i) {
      const int n = thread * kWrites + i;
      const std::string id = "w-" + std::to_string(n);
      auto body = [&](Tx& tx) -> Status {
        CP_TRY(tx.insert_task(make_task(id, kT0 + n)));
        CP_TRY(increment(tx, "counter"));
        if (n % 10 == 0) throw std::runtime_error("body " + id + " threw");
        if (n % 3 == 0) return errors::invalid("body", id + " failed", id + " 失败");
        return {};
      };
      try {
        Status s = store_->write(body);
        if (n % 3 == 0) {
          EXPECT_FALSE(s.ok()) << id;
          if (!s.ok()) {
            EXPECT_NE(s.error().message.find(id), std::string::npos) << s.error().message;
          }
        } else {
          EXPECT_TRUE(s.ok()) << id << ": " << s.error().to_string();
          succeeded++;
        }
        EXPECT_NE(n % 10, 0) << id << " should have thrown";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(n % 10, 0) << e.what();
        EXPECT_NE(std::string(e.what()).find(id), std::string::npos) << e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();

  auto tasks = read([](Tx& tx) { return tx.tasks_in_states({TaskState::Queued}); });
  EXPECT_EQ(static_cast<int>(tasks.size()), succeeded.load());
  for (const auto& t : tasks) {
    const int n = std::stoi(t.id.substr(2));
    EXPECT_TRUE(n % 3 != 0 && n % 10 != 0) << t.id;
  }
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("counter"); }),
            std::optional<std::string>(std::to_string(succeeded.load())));
}

TEST_P(StoreTest, AnOpenReadDoesNotHoldUpAWriteAndKeepsItsSnapshot) {
  // The scheduler reads the live state while submits keep coming: a write
  // commits while a read transaction is open on another thread, and that read
  // goes on seeing the database as it was when it began.
  if (!db_.persistent) GTEST_SKIP() << GetParam().name << " has one connection for reads and writes";
  write([](Tx& tx) { return tx.insert_task(make_task("t-before", kT0)); });
  std::promise<void> reading, written;
  std::shared_future<void> written_future = written.get_future().share();
  std::size_t seen_first = 0, seen_after = 0;
  bool write_came = false;
  std::thread reader([&] {
    Status s = store_->read([&](Tx& tx) -> Status {
      CP_ASSIGN(auto first, tx.tasks_in_states({TaskState::Queued}));
      seen_first = first.size();
      reading.set_value();
      write_came = written_future.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
      CP_ASSIGN(auto after, tx.tasks_in_states({TaskState::Queued}));
      seen_after = after.size();
      return {};
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  });
  reading.get_future().wait();
  write([](Tx& tx) { return tx.insert_task(make_task("t-during", kT0 + 1)); });
  written.set_value();
  reader.join();
  EXPECT_TRUE(write_came) << "the write waited for the read to end";
  EXPECT_EQ(seen_first, 1u);
  EXPECT_EQ(seen_after, 1u);
  EXPECT_EQ(read([](Tx& tx) { return tx.tasks_in_states({TaskState::Queued}); }).size(), 2u);
}

TEST_P(StoreTest, DataSurvivesCloseAndReopen) {
  if (!db_.persistent) GTEST_SKIP() << GetParam().name << " keeps nothing after close";
  Task t = make_task("t-1", kT0);
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.upsert_node(make_node("c-east", "node-1")));
    CP_TRY(tx.set_node_admin("c-east", "node-1", {{"pool", "infer"}}, true));
    CP_TRY(tx.insert_task(t));
    CP_TRY(tx.append_event(make_event("task", "t-1", kT0, "task.created")));
    return tx.set_meta("k", "v");
  });
  store_.reset();

  store_ = db_.open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->schema_version(), latest_schema_version());  // before migrate: the file knows
  ASSERT_OK(store_->migrate());
  auto got = read([](Tx& tx) { return tx.get_task("t-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(t, *got);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("k"); }), std::optional<std::string>("v"));
  auto node = read([](Tx& tx) { return tx.get_node("c-east", "node-1"); });
  ASSERT_TRUE(node.has_value());
  EXPECT_TRUE(node->maintenance);
  auto events = read([](Tx& tx) { return tx.list_events(EventQuery{}); });
  ASSERT_EQ(events.size(), 1u);
  // Event ids continue after a restart instead of starting over.
  std::int64_t next = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(next, tx.append_event(make_event("task", "t-1", kT0 + 1, "task.state")));
    return {};
  });
  EXPECT_GT(next, events[0].id);
}

}  // namespace
}  // namespace cp::testing
