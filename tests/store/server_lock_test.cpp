// One server per store (store/server_lock.h): the second is refused with
// store_in_use, in English and Chinese, and gets the store once the first
// lets go. SQLite through a file lock; PostgreSQL through an advisory lock
// (CUBEPLANE_TEST_POSTGRES_URL, as the other PostgreSQL tests).
#include "store/server_lock.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace cp {
namespace {

void expect_refused(const Result<std::unique_ptr<ServerLock>>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "store_in_use");
  EXPECT_EQ(r.error().status, 409);
  EXPECT_NE(r.error().message.find("another cubeplane server"), std::string::npos);
  EXPECT_NE(r.error().message_zh.find("另一个"), std::string::npos);
}

TEST(ServerLockTest, ASecondServerOnOneSqliteFileIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("cp-lock-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "cubeplane.db").string();
  {
    auto first = lock_store_for_server(url, 0);
    ASSERT_TRUE(first.ok()) << first.error().message;
    expect_refused(lock_store_for_server(url, 300));
    // Another database beside it is another store.
    EXPECT_TRUE(lock_store_for_server("sqlite://" + (dir / "other.db").string(), 0).ok());
  }
  EXPECT_TRUE(lock_store_for_server(url, 0).ok()) << "the first let go";
  EXPECT_TRUE(lock_store_for_server("sqlite::memory:", 0).ok());
  std::filesystem::remove_all(dir);
}

TEST(ServerLockTest, SeveralServersShareOnePostgresDatabase) {
  // They elect a leader there (server/beacon.h): nothing to lock.
  const std::string url = "postgresql://cubeplane@127.0.0.1:1/cubeplane";
  auto first = lock_store_for_server(url, 0);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(lock_store_for_server(url, 0).ok());
  EXPECT_FALSE(lock_store_for_server("postgresql://h/db?pool=0", 0).ok()) << "a malformed URL is still refused";
}

}  // namespace
}  // namespace cp
