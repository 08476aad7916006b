// SQLite: the conformance suite on an in-memory and a file database, and the
// things only SQLite has (URLs, pragmas, several connections on one file).
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "store/migrations.h"
#include "store/sqlite/sqlite_store.h"
#include "store/task_cursor.h"
#include "store_conformance.h"

namespace cp::testing {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test under the system temp dir.
fs::path make_test_dir() {
  static std::atomic<int> counter{0};
  fs::path dir = fs::temp_directory_path() /
                 ("cubeplane-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::unique_ptr<Store> open_or_fail(const std::string& url) {
  auto store = open_store(url);
  EXPECT_TRUE(store.ok()) << store.error().to_string();
  return store.ok() ? std::move(store).value() : nullptr;
}

StoreBackend sqlite_memory_backend() {
  return {"SqliteMemory", [] { return TestDatabase{[] { return open_or_fail("sqlite::memory:"); }, false, {}}; }};
}

StoreBackend sqlite_file_backend() {
  return {"SqliteFile", [] {
            fs::path dir = make_test_dir();
            std::string url = "sqlite://" + (dir / "cubeplane.db").string();
            return TestDatabase{[url] { return open_or_fail(url); }, true, [dir] { fs::remove_all(dir); }};
          }};
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(sqlite_memory_backend(), sqlite_file_backend()),
                         backend_name);

// -------------------------------------------------------------- open_store

TEST(OpenStore, SqliteUrls) {
  auto memory = parse_sqlite_url("sqlite::memory:");
  ASSERT_OK(memory);
  EXPECT_EQ(memory->path, ":memory:");
  EXPECT_EQ(memory->synchronous, SqliteSynchronous::normal);

  auto file = parse_sqlite_url("sqlite:///var/lib/cubeplane/meta.db?synchronous=full");
  ASSERT_OK(file);
  EXPECT_EQ(file->path, "/var/lib/cubeplane/meta.db");
  EXPECT_EQ(file->synchronous, SqliteSynchronous::full);

  for (const char* bad : {"sqlite://relative.db", "sqlite:///", "sqlite:", "sqlite:///dir/", "sqlite:///a?synchronous=off",
                          "sqlite:///a?cache=shared", "sqlite::memory:?mode=ro"}) {
    auto r = parse_sqlite_url(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, "invalid_store_url") << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
  }
}

TEST(OpenStore, OtherSchemesAreInvalid) {
  // postgresql:// is postgres_store_test.cpp's.
  for (const char* bad : {"", "mysql://db/x", "/var/lib/cubeplane.db", "sqlite:relative.db", "postgresql:/db"}) {
    auto r = open_store(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, "invalid_store_url") << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
  }
}

TEST(OpenStore, UnopenableFileIs503StoreError) {
  auto r = open_store("sqlite:///nonexistent-dir-for-cubeplane-tests/x/meta.db");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "store_error");
  EXPECT_EQ(r.error().status, 503);
}

// ------------------------------------------------------------ SQLite only

// A raw connection to look at the file the way an operator would.
class RawSqlite {
 public:
  explicit RawSqlite(const fs::path& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK); }
  ~RawSqlite() { sqlite3_close(db_); }
  RawSqlite(const RawSqlite&) = delete;
  RawSqlite& operator=(const RawSqlite&) = delete;
  std::string text(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return out;
  }
  int exec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_test_dir();
    path_ = dir_ / "cubeplane.db";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<SqliteStore> open(SqliteOptions options = {}) {
    options.path = path_.string();
    auto store = SqliteStore::open(options);
    EXPECT_TRUE(store.ok()) << store.error().to_string();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  fs::path dir_;
  fs::path path_;
};

TEST_F(SqliteFileTest, UsesWalJournalAndRecordsEachMigration) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 0);  // nothing applied yet
  ASSERT_OK(store->migrate());
  RawSqlite raw(path_);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");  // WAL is a property of the file
  EXPECT_EQ(raw.text("SELECT COUNT(*) FROM schema_migrations"), std::to_string(migrations().size()));
  EXPECT_EQ(raw.text("SELECT MAX(version) FROM schema_migrations"), std::to_string(latest_schema_version()));
}

TEST_F(SqliteFileTest, MigrationsAreStampedWithTheInjectedClock) {
  SimulatedClock clock(kT0);
  SqliteOptions options;
  options.clock = &clock;
  auto store = open(options);
  ASSERT_OK(store->migrate());
  RawSqlite raw(path_);
  EXPECT_EQ(raw.text("SELECT MIN(applied_at) FROM schema_migrations"), std::to_string(kT0));
}

TEST_F(SqliteFileTest, ASchemaNewerThanThisBuildIsRefused) {
  // An older binary must not run against a database a newer one upgraded.
  ASSERT_OK(open()->migrate());
  {
    RawSqlite raw(path_);
    ASSERT_EQ(raw.exec("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)"), SQLITE_OK);
  }
  Status s = open()->migrate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "store_error");
  EXPECT_NE(s.error().message.find("999"), std::string::npos);
}

TEST_F(SqliteFileTest, ABusyDatabaseIs503AfterTheRetries) {
  SqliteOptions options;
  options.busy_timeout_ms = 5;  // keep the six tries short
  auto store = open(options);
  ASSERT_OK(store->migrate());
  RawSqlite other(path_);
  ASSERT_EQ(other.exec("BEGIN IMMEDIATE"), SQLITE_OK);  // another process holds the write lock

  int runs = 0;
  Status s = store->write([&](Tx& tx) -> Status {
    ++runs;
    return tx.set_meta("k", "v");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "store_error");
  EXPECT_EQ(s.error().status, 503);
  EXPECT_EQ(runs, 0);  // BEGIN IMMEDIATE failed first: the body never ran half-way

  // Readers are not blocked by a writer under WAL.
  EXPECT_OK(store->read([](Tx& tx) -> Status {
    CP_TRY(tx.get_meta("k"));
    return {};
  }));

  ASSERT_EQ(other.exec("COMMIT"), SQLITE_OK);
  EXPECT_OK(store->write([](Tx& tx) { return tx.set_meta("k", "v"); }));
}

TEST_F(SqliteFileTest, TwoConnectionsOnOneFileLoseNoUpdate) {
  // Two stores on the same file are two processes as far as SQLite can tell:
  // they serialize on the file lock (BEGIN IMMEDIATE + busy timeout), not on
  // our mutex.
  auto first = open();
  auto second = open();
  ASSERT_OK(first->migrate());
  ASSERT_OK(second->migrate());
  constexpr int kWrites = 200;
  auto worker = [&](Store* store) {
    for (int i = 0; i < kWrites; ++i) {
      Status s = store->write([](Tx& tx) -> Status {
        CP_ASSIGN(auto value, tx.get_meta("counter"));
        int n = value ? std::stoi(*value) : 0;
        return tx.set_meta("counter", std::to_string(n + 1));
      });
      EXPECT_TRUE(s.ok()) << s.error().to_string();
    }
  };
  std::thread a(worker, first.get());
  std::thread b(worker, second.get());
  a.join();
  b.join();
  std::optional<std::string> counter;
  EXPECT_OK(first->read([&](Tx& tx) -> Status {
    CP_ASSIGN(counter, tx.get_meta("counter"));
    return {};
  }));
  EXPECT_EQ(counter, std::optional<std::string>(std::to_string(2 * kWrites)));
}

TEST_F(SqliteFileTest, ABodyOfAGroupKnowsTheTasksTheBodiesBeforeItWrote) {
  // Tx::wrote_task: what the change journal does not name yet inside a write.
  // A holds the writer until B and C queue; B and C then share one group.
  auto store = open();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  std::atomic<bool> release{false}, a_inside{false};
  std::thread a([&] {
    EXPECT_OK(store->write([&](Tx& tx) -> Status {
      EXPECT_TRUE(tx.journal_is_current());
      CP_TRY(tx.insert_task(make_task("t-a", 1000)));
      EXPECT_TRUE(tx.wrote_task("t-a"));
      a_inside = true;
      EXPECT_TRUE(eventually([&] { return release.load(); }));
      return {};
    }));
  });
  ASSERT_TRUE(eventually([&] { return a_inside.load(); }));
  std::thread b([&] {
    // Refused after writing: rolled back to its savepoint, still named below.
    EXPECT_FALSE(store->write([&](Tx& tx) -> Status {
                        CP_TRY(tx.insert_task(make_task("t-b", 1000)));
                        return Error{"refused", 409, "no", "不", {}};
                      })
                     .ok());
  });
  ASSERT_TRUE(eventually([&] { return store->queued_writes() == 1; }));
  std::thread c([&] {
    EXPECT_OK(store->write([&](Tx& tx) -> Status {
      EXPECT_TRUE(tx.journal_is_current());
      EXPECT_FALSE(tx.wrote_task("t-a"));  // committed and published before this group began
      EXPECT_TRUE(tx.wrote_task("t-b"));   // the body before, in this transaction
      EXPECT_FALSE(tx.wrote_task("t-c"));
      CP_TRY(tx.insert_task(make_task("t-c", 1000)));
      EXPECT_TRUE(tx.wrote_task("t-c"));
      return {};
    }));
  });
  ASSERT_TRUE(eventually([&] { return store->queued_writes() == 2; }));
  release = true;
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(store->group_stats().groups, 2);  // {A}, then {B, C}
  EXPECT_EQ(store->group_stats().writes, 3);
  EXPECT_OK(store->read([](Tx& tx) -> Status {
    EXPECT_FALSE(tx.journal_is_current());  // a read is no write
    CP_ASSIGN(auto b, tx.get_task("t-b"));
    EXPECT_FALSE(b.has_value());
    CP_ASSIGN(auto c, tx.get_task("t-c"));
    EXPECT_TRUE(c.has_value());
    return {};
  }));
}

// A body that counts its runs in `runs` and inserts task `id`.
std::function<Status(Tx&)> counted_insert(std::atomic<int>& runs, std::string id) {
  return [&runs, id = std::move(id)](Tx& tx) -> Status {
    ++runs;
    return tx.insert_task(make_task(id, 1000));
  };
}

TEST_F(SqliteFileTest, AGroupRunsAgainBehindSavepointsOnlyWhenABodyFailsAfterWriting) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  std::atomic<int> runs_a{0}, runs_b{0}, runs_c{0};
  // B fails before writing anything: nothing to undo, the group commits as
  // it ran, and no body runs twice.
  std::vector<Status> results;
  run_one_group(*store,
                {counted_insert(runs_a, "t-a"),
                 [&](Tx& tx) -> Status {
                   ++runs_b;
                   CP_ASSIGN(auto t, tx.get_task("t-a"));
                   if (!t) return Error{"test", 500, "t-a not seen", "", {}};
                   return Error{"refused", 409, "no", "不", {}};
                 },
                 counted_insert(runs_c, "t-c")},
                results);
  EXPECT_OK(results[0]);
  EXPECT_EQ(results[1].error().code, "refused");
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_a.load(), 1);
  EXPECT_EQ(runs_b.load(), 1);
  EXPECT_EQ(runs_c.load(), 1);
  // E fails after writing: the group runs again, each body behind a
  // savepoint, and only E's rows are undone.
  std::atomic<int> runs_d{0}, runs_e{0}, runs_f{0};
  run_one_group(*store,
                {counted_insert(runs_d, "t-d"),
                 [&](Tx& tx) -> Status {
                   ++runs_e;
                   CP_TRY(tx.insert_task(make_task("t-e", 1000)));
                   CP_TRY(tx.set_meta("e", "wrote"));
                   return Error{"refused", 409, "no", "不", {}};
                 },
                 counted_insert(runs_f, "t-f")},
                results);
  EXPECT_OK(results[0]);
  EXPECT_EQ(results[1].error().code, "refused");
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_d.load(), 2);  // once without savepoints (rolled back), once behind one
  EXPECT_EQ(runs_e.load(), 2);
  EXPECT_EQ(runs_f.load(), 1);  // the first run stopped at E
  EXPECT_OK(store->read([](Tx& tx) -> Status {
    for (const char* kept : {"t-a", "t-c", "t-d", "t-f"}) {
      CP_ASSIGN(auto t, tx.get_task(kept));
      EXPECT_TRUE(t.has_value()) << kept;
    }
    for (const char* undone : {"t-e"}) {
      CP_ASSIGN(auto t, tx.get_task(undone));
      EXPECT_FALSE(t.has_value()) << undone;
    }
    CP_ASSIGN(auto e, tx.get_meta("e"));
    EXPECT_FALSE(e.has_value());
    return {};
  }));
}

TEST_F(SqliteFileTest, TheWalIsCheckpointedInTheBackgroundNotByTheWriter) {
  // Past checkpoint_pages the writer's commit only wakes the checkpoint
  // thread; the log is copied back by it, and the writer never checkpoints
  // while the thread keeps up (it would past twice as many pages).
  SqliteOptions options;
  options.checkpoint_pages = 32;
  auto store = open(options);
  ASSERT_NE(store, nullptr);
  // The migrations' big commits may pass the writer's mark on their own;
  // closing the last connection checkpoints and removes the log.
  ASSERT_OK(store->migrate());
  store.reset();
  store = open(options);
  ASSERT_NE(store, nullptr);
  const auto before = store->checkpoint_stats();
  const auto wal = fs::path(path_.string() + "-wal");
  for (int i = 0; i < 400; ++i) {
    ASSERT_OK(store->write([&](Tx& tx) { return tx.insert_task(make_task("t-" + std::to_string(i), 1000 + i)); }));
    // Wait for a woken checkpoint before going on, so that the log never
    // outgrows the thread on a slow machine.
    ASSERT_TRUE(eventually([&] { return !store->checkpoint_stats().pending; }));
  }
  const auto stats = store->checkpoint_stats();
  EXPECT_GE(stats.background - before.background, 10);
  EXPECT_EQ(stats.by_writer, before.by_writer);
  EXPECT_EQ(stats.failed, 0);
  // The log was restarted from its start after checkpoints: the 400
  // commits wrote some 4,000 pages (16 MiB), the file holds a few dozen.
  EXPECT_LT(fs::file_size(wal), 1u << 20);
  // Everything committed reads back, here and after a reopen.
  store.reset();
  store = open(options);
  ASSERT_NE(store, nullptr);
  EXPECT_OK(store->read([](Tx& tx) -> Status {
    for (int i = 0; i < 400; i += 57) {
      CP_ASSIGN(auto t, tx.get_task("t-" + std::to_string(i)));
      EXPECT_TRUE(t.has_value()) << i;
    }
    return {};
  }));
}

TEST_F(SqliteFileTest, AnUpdateThatMovesATasksFixedColumnsStillWritesThem) {
  // update_task sets only the columns that move (state, cluster, times,
  // document); a task whose resource group or creation time did change
  // must still be found by them.
  auto store = open();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  Task t = make_task("t-move", 1000);
  ASSERT_OK(store->write([&](Tx& tx) { return tx.insert_task(t); }));
  t.state = TaskState::Admitted;
  t.updated_at = 2000;
  ASSERT_OK(store->write([&](Tx& tx) { return tx.update_task(t); }));  // the narrow update
  t.resource_group = "rg-other";
  t.created_at = 1500;
  ASSERT_OK(store->write([&](Tx& tx) { return tx.update_task(t); }));  // the whole row
  RawSqlite raw(path_);
  EXPECT_EQ(raw.text("SELECT resource_group || ' ' || created_at || ' ' || state FROM tasks WHERE id = 't-move'"),
            "rg-other 1500 Admitted");
  EXPECT_OK(store->read([](Tx& tx) -> Status {
    TaskQuery q;
    q.resource_group = "rg-other";
    CP_ASSIGN(auto page, tx.list_tasks(q));
    EXPECT_EQ(page.items.size(), 1u);
    return {};
  }));
  // A task that is not there is still 404.
  Task missing = make_task("t-none", 1000);
  Status st = store->write([&](Tx& tx) { return tx.update_task(missing); });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().status, 404);
}

// -------------------------------------------------------------- task cursor

TEST(TaskCursor, RoundTripsAndRefusesWhatItDidNotMake) {
  TaskCursor c{kT0, "t-01hx3k:with-colon"};
  auto back = decode_task_cursor(encode_task_cursor(c));
  ASSERT_OK(back);
  EXPECT_EQ(back->created_at, c.created_at);
  EXPECT_EQ(back->id, c.id);
  EXPECT_EQ(encode_task_cursor({12, "t-1"}), "MTI6dC0x");

  for (const char* bad : {"", "MTI6dC0x=", "MTI6dC0x!", "MTI6", "OnQtMQ" /* ":t-1" */, "MTI6dC0xA"}) {
    auto r = decode_task_cursor(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, "invalid_cursor") << bad;
  }
}

}  // namespace
}  // namespace cp::testing
