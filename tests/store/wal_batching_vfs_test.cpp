// The WAL-batching VFS (store/sqlite/wal_batching_vfs.h), on raw SQLite: a
// commit reaches the WAL in one write, is visible to a reader on the default
// VFS as soon as COMMIT returns, survives the writer's connection being
// dropped without a checkpoint, and large transactions that spill their
// cache mid-way still come out whole.
#include "store/sqlite/wal_batching_vfs.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace cp::testing {
namespace {

namespace fs = std::filesystem;

class Db {
 public:
  Db(const std::string& path, const char* vfs, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, flags, vfs), SQLITE_OK);
  }
  ~Db() { sqlite3_close_v2(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  long long scalar(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db_);
    long long v = -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

class WalBatchingVfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cubeplane-walvfs-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "t.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string path_;
};

TEST_F(WalBatchingVfsTest, ACommitIsOneWriteAndAReaderSeesItAtOnce) {
  Db w(path_, sqlite::wal_batching_vfs());
  w.exec("PRAGMA journal_mode = WAL");
  w.exec("PRAGMA synchronous = NORMAL");
  w.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT)");
  w.exec("CREATE INDEX t_a ON t (a)");
  w.exec("CREATE INDEX t_b ON t (b)");
  Db r(path_, nullptr, SQLITE_OPEN_READONLY);  // the default VFS
  for (int i = 0; i < 20; ++i) {
    const auto before = sqlite::wal_batching_stats();
    w.exec("INSERT INTO t (a, b) VALUES (hex(randomblob(200)), hex(randomblob(300)))");
    const auto after = sqlite::wal_batching_stats();
    // Three pages (the table and two indices), each a header and a page write, in one flush.
    EXPECT_GE(after.writes - before.writes, 6);
    EXPECT_EQ(after.flushes - before.flushes, 1);
    EXPECT_EQ(r.scalar("SELECT COUNT(*) FROM t"), i + 1);
  }
  // A larger commit: over 64 KiB of frames, written in 64 KiB pieces.
  const auto before = sqlite::wal_batching_stats();
  w.exec("BEGIN IMMEDIATE");
  for (int j = 0; j < 200; ++j) w.exec("INSERT INTO t (a, b) VALUES (hex(randomblob(200)), hex(randomblob(300)))");
  w.exec("COMMIT");
  const auto after = sqlite::wal_batching_stats();
  const long long frames = (after.writes - before.writes) / 2;
  EXPECT_GT(frames, 16);
  EXPECT_EQ(after.flushes - before.flushes, (frames * (24 + 4096) + 65535) / 65536);
  EXPECT_EQ(r.scalar("SELECT COUNT(*) FROM t"), 220);
}

TEST_F(WalBatchingVfsTest, CommittedRowsSurviveWithoutACheckpoint) {
  {
    Db w(path_, sqlite::wal_batching_vfs());
    w.exec("PRAGMA journal_mode = WAL");
    w.exec("PRAGMA wal_autocheckpoint = 0");  // everything stays in the WAL
    w.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)");
    for (int i = 0; i < 100; ++i) w.exec("INSERT INTO t (a) VALUES ('row')");
    // A second connection keeps the WAL from being checkpointed and deleted at close.
    Db keep(path_, nullptr);
    EXPECT_EQ(keep.scalar("SELECT COUNT(*) FROM t"), 100);
    ASSERT_TRUE(fs::exists(path_ + "-wal"));
    EXPECT_GT(fs::file_size(path_ + "-wal"), 4096u * 10);
    // Copy the database and its WAL as a crash would leave them.
    fs::copy_file(path_, dir_ / "copy.db");
    fs::copy_file(path_ + "-wal", dir_ / "copy.db-wal");
  }
  Db again((dir_ / "copy.db").string(), nullptr);
  EXPECT_EQ(again.scalar("SELECT COUNT(*) FROM t"), 100);
}

TEST_F(WalBatchingVfsTest, ALargeTransactionThatSpillsItsCacheComesOutWhole) {
  Db w(path_, sqlite::wal_batching_vfs());
  w.exec("PRAGMA journal_mode = WAL");
  w.exec("PRAGMA cache_size = 10");  // pages: the transaction spills frames to the WAL before COMMIT
  w.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)");
  w.exec("CREATE INDEX t_a ON t (a)");
  w.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < 5000; ++i) w.exec("INSERT INTO t (a) VALUES (hex(randomblob(100)))");
  // Read back inside the transaction: pages spilled to the WAL are read from it.
  EXPECT_EQ(w.scalar("SELECT COUNT(*) FROM t WHERE a IS NOT NULL"), 5000);
  w.exec("COMMIT");
  Db r(path_, nullptr, SQLITE_OPEN_READONLY);
  EXPECT_EQ(r.scalar("SELECT COUNT(*) FROM t"), 5000);
  w.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  EXPECT_EQ(r.scalar("SELECT COUNT(*) FROM t"), 5000);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(r.raw(), "PRAGMA integrity_check", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
  sqlite3_finalize(st);
}

TEST_F(WalBatchingVfsTest, ARolledBackTransactionLeavesNothing) {
  Db w(path_, sqlite::wal_batching_vfs());
  w.exec("PRAGMA journal_mode = WAL");
  w.exec("PRAGMA cache_size = 10");
  w.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)");
  w.exec("INSERT INTO t (a) VALUES ('kept')");
  w.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < 3000; ++i) w.exec("INSERT INTO t (a) VALUES (hex(randomblob(100)))");
  w.exec("ROLLBACK");
  EXPECT_EQ(w.scalar("SELECT COUNT(*) FROM t"), 1);
  w.exec("INSERT INTO t (a) VALUES ('after')");
  Db r(path_, nullptr, SQLITE_OPEN_READONLY);
  EXPECT_EQ(r.scalar("SELECT COUNT(*) FROM t"), 2);
}

}  // namespace
}  // namespace cp::testing
