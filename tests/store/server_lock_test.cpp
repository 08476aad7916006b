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

TEST(ServerLockTest, ASecondServerOnOnePostgresDatabaseIsRefused) {
  const char* off = std::getenv("CUBEPLANE_TEST_POSTGRES");
  if (off != nullptr && std::string_view(off) == "off") GTEST_SKIP() << "CUBEPLANE_TEST_POSTGRES=off";
  const char* url = std::getenv("CUBEPLANE_TEST_POSTGRES_URL");
  if (url == nullptr || *url == '\0') {
    FAIL() << "CUBEPLANE_TEST_POSTGRES_URL is not set: export CUBEPLANE_TEST_POSTGRES_URL=$(scripts/"
              "postgres-test-server.sh start), or CUBEPLANE_TEST_POSTGRES=off to skip";
  }
  {
    auto first = lock_store_for_server(url, 0);
    ASSERT_TRUE(first.ok()) << first.error().message;
    expect_refused(lock_store_for_server(url, 300));
  }
  EXPECT_TRUE(lock_store_for_server(url, 2000).ok()) << "the first let go";
}

}  // namespace
}  // namespace cp
