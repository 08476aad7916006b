#include "store/server_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace cp {
namespace {

Error in_use(const std::string& where) {
  Error e{"store_in_use", 409,
          "another cubeplane server already runs on " + where +
              ": SQLite takes one server (several servers need PostgreSQL, where they elect a leader); "
              "stop the other one, or give this one its own --store and --data-dir",
          "另一个 cubeplane server 已在使用 " + where +
              "：SQLite 只能供一个 server 使用（多个 server 需使用 PostgreSQL，由它们选举领导者）；"
              "请先停止另一个，或为本进程指定独立的 --store 和 --data-dir",
          {}};
  return e;
}

class FileLock final : public ServerLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {}
  ~FileLock() override { ::close(fd_); }  // closing drops the flock

 private:
  int fd_;
};

class NoLock final : public ServerLock {};

Result<std::unique_ptr<ServerLock>> try_lock(const std::string& store_url) {
  if (store_url.starts_with("sqlite:")) {
    CP_ASSIGN(SqliteOptions options, parse_sqlite_url(store_url));
    if (options.path == ":memory:") return std::unique_ptr<ServerLock>(new NoLock);
    const std::string path = options.path + ".server-lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      const std::string why = std::strerror(errno);
      return errors::unavailable("cannot open " + path + ": " + why, "无法打开 " + path + "：" + why);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return in_use(options.path);
    }
    return std::unique_ptr<ServerLock>(new FileLock(fd));
  }
  // PostgreSQL: several servers share it and elect a leader (server/beacon.h).
  CP_ASSIGN(PostgresOptions options, parse_postgres_url(store_url));
  (void)options;
  return std::unique_ptr<ServerLock>(new NoLock);
}

}  // namespace

Result<std::unique_ptr<ServerLock>> lock_store_for_server(const std::string& store_url, int wait_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  bool told = false;
  while (true) {
    auto lock = try_lock(store_url);
    if (lock.ok() || lock.error().code != "store_in_use" || std::chrono::steady_clock::now() >= until) return lock;
    if (!told) {
      spdlog::warn("{}; waiting up to {} ms for it to go", lock.error().message, wait_ms);
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace cp
