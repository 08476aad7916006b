// PostgreSQL: the conformance suite on a fresh database per test, and what
// only PostgreSQL has (URLs, the pool, concurrent writers, reconnecting,
// concurrent migrations).
//
// The server comes from CUBEPLANE_TEST_POSTGRES_URL, e.g.
//   export CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)
// (scripts/test.sh does that). Without it these tests fail and say how to
// start one; CUBEPLANE_TEST_POSTGRES=off skips them instead.
#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cstdlib>
#include <future>
#include <latch>
#include <stdexcept>
#include <thread>

#include "store/migrations.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/postgres_store.h"
#include "store_conformance.h"

namespace cp::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kHowToStart =
    "The PostgreSQL tests need a server. Start a throwaway one and point the tests at it:\n"
    "  export CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start)\n"
    "  ... run the tests ...\n"
    "  scripts/postgres-test-server.sh stop\n"
    "(scripts/test.sh does this by itself), or set CUBEPLANE_TEST_POSTGRES=off to skip them.";

// Sets *url to the test server's URL; skips (CUBEPLANE_TEST_POSTGRES=off) or
// fails (no URL) otherwise, leaving it empty.
void require_server(std::string* url) {
  const char* off = std::getenv("CUBEPLANE_TEST_POSTGRES");
  if (off != nullptr && std::string_view(off) == "off") GTEST_SKIP() << "CUBEPLANE_TEST_POSTGRES=off";
  const char* env = std::getenv("CUBEPLANE_TEST_POSTGRES_URL");
  if (env == nullptr || *env == '\0') FAIL() << "CUBEPLANE_TEST_POSTGRES_URL is not set.\n" << kHowToStart;
  *url = env;
}

// A plain libpq connection, to look at and poke the server as an operator would.
class RawPg {
 public:
  explicit RawPg(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);  // "does not exist, skipping"
  }
  ~RawPg() { PQfinish(conn_); }
  RawPg(const RawPg&) = delete;
  RawPg& operator=(const RawPg&) = delete;

  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  std::string error() const { return PQerrorMessage(conn_); }
  // Runs `sql`; false (with the message in *error) if it failed.
  bool exec(const std::string& sql, std::string* error = nullptr) {
    PGresult* r = PQexec(conn_, sql.c_str());
    bool good = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!good && error != nullptr) *error = PQerrorMessage(conn_);
    PQclear(r);
    return good;
  }
  // The first column of the first row, "" if there is none.
  std::string text(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    std::string out;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQerrorMessage(conn_);
    } else if (PQntuples(r) > 0) {
      out = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return out;
  }

 private:
  PGconn* conn_;
};

// The server URL with its database replaced by `name`.
std::string with_database(const std::string& url, const std::string& name) {
  auto authority = url.find("://");
  authority = authority == std::string::npos ? 0 : authority + 3;
  auto path = url.find_first_of("/?", authority);
  if (path == std::string::npos) return url + "/" + name;
  auto query = url.find('?', path);
  std::string rest = query == std::string::npos ? "" : url.substr(query);
  return url.substr(0, path) + "/" + name + rest;
}

std::string with_param(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

// Unique per process and test; the pid keeps parallel test processes apart.
std::string unique_database_name() {
  static std::atomic<int> counter{0};
  return "cp_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

void drop_database(const std::string& server, const std::string& name) {
  RawPg admin(server);
  std::string error;
  if (!admin.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", &error)) {
    ADD_FAILURE() << "dropping " << name << ": " << error;
  }
}

// A fresh database on the test server: fills *server, *name and *url, or
// skips or fails (see require_server) and leaves them empty.
void create_test_database(std::string* server, std::string* name, std::string* url) {
  std::string found;
  require_server(&found);
  if (found.empty()) return;
  RawPg admin(found);
  ASSERT_TRUE(admin.ok()) << "cannot connect to CUBEPLANE_TEST_POSTGRES_URL=" << found << ": " << admin.error()
                          << "\n" << kHowToStart;
  std::string db = unique_database_name();
  std::string error;
  ASSERT_TRUE(admin.exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", &error)) << error;  // a crashed run's
  // An ICU collation, whose order is not the bytes' ("B" after "a"): the
  // suite then shows that the store sorts like SQLite whatever collation a
  // database has. A server without ICU gets its default.
  if (!admin.exec("CREATE DATABASE " + db + " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")) {
    ASSERT_TRUE(admin.exec("CREATE DATABASE " + db + " TEMPLATE template0", &error)) << error;
  }
  *server = found;
  *name = db;
  *url = with_database(found, db);
}

std::unique_ptr<Store> open_or_fail(const std::string& url) {
  auto store = open_store(url);
  EXPECT_TRUE(store.ok()) << store.error().to_string();
  return store.ok() ? std::move(store).value() : nullptr;
}

// Fills `db` with a fresh database, or leaves it empty after a skip or failure.
void make_test_database(TestDatabase* db) {
  std::string server, name, url;
  create_test_database(&server, &name, &url);
  if (url.empty()) return;
  db->open = [url] { return open_or_fail(url); };
  db->persistent = true;
  db->drop = [server, name] { drop_database(server, name); };
}

StoreBackend postgres_backend() {
  return {"Postgres", [] {
            TestDatabase db;
            make_test_database(&db);
            return db;
          }};
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreTest, ::testing::Values(postgres_backend()), backend_name);

// ------------------------------------------------------------------- URLs

TEST(PostgresUrl, PoolIsTakenOutAndTheRestGoesToLibpq) {
  auto o =
      parse_postgres_url("postgresql://cp:secret@db.example:5432/cubeplane?sslmode=require&pool=8&connect_timeout=5");
  ASSERT_OK(o);
  EXPECT_EQ(o->pool_size, 8);
  EXPECT_EQ(o->conninfo, "postgresql://cp:secret@db.example:5432/cubeplane?sslmode=require&connect_timeout=5");
  EXPECT_EQ(o->display, "postgresql://cp:***@db.example:5432/cubeplane?sslmode=require&connect_timeout=5");

  auto plain = parse_postgres_url("postgres://db/cubeplane");
  ASSERT_OK(plain);
  EXPECT_EQ(plain->pool_size, 4);
  EXPECT_EQ(plain->conninfo, "postgres://db/cubeplane");

  auto only_pool = parse_postgres_url("postgresql:///cubeplane?pool=1");
  ASSERT_OK(only_pool);
  EXPECT_EQ(only_pool->pool_size, 1);
  EXPECT_EQ(only_pool->conninfo, "postgresql:///cubeplane");

  auto password_param = parse_postgres_url("postgresql://cp@db/x?password=secret&application_name=cp");
  ASSERT_OK(password_param);
  EXPECT_EQ(password_param->display, "postgresql://cp@db/x?password=***&application_name=cp");

  auto groups = parse_postgres_url("postgresql://db/x?pool=8&group_commits=3&sslmode=require");
  ASSERT_OK(groups);
  EXPECT_EQ(groups->pool_size, 8);
  EXPECT_EQ(groups->group_commits, 3);
  EXPECT_EQ(groups->conninfo, "postgresql://db/x?sslmode=require");
  EXPECT_EQ(plain->group_commits, 0);  // the default: 2, at most half the pool

  for (const char* bad : {"postgresql://cp:secret@db/x?pool=0", "postgresql://cp:secret@db/x?pool=101",
                          "postgresql://cp:secret@db/x?group_commits=0", "postgresql://cp:secret@db/x?group_commits=x",
                          "postgresql://cp:secret@db/x?pool=2&group_commits=3",
                          "postgresql://cp:secret@db/x?pool=", "postgresql://cp:secret@db/x?pool=2x",
                          "postgresql://cp:secret@db/x?bogus=1", "postgresql://db/x?password=secret&bogus=1",
                          "pg://cp:secret@db/x"}) {
    auto r = parse_postgres_url(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, "invalid_store_url") << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
    EXPECT_EQ(r.error().message.find("secret"), std::string::npos) << r.error().message;
  }
}

TEST(PostgresUrl, AnUnreachableServerIs503WithoutThePassword) {
  // Port 1 on the loopback: refused at once, no server needed.
  auto r = open_store("postgresql://cp:secret@127.0.0.1:1/cubeplane?connect_timeout=2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "store_error");
  EXPECT_EQ(r.error().status, 503);
  EXPECT_EQ(r.error().message.find("secret"), std::string::npos) << r.error().message;
}

// ------------------------------------------------------- PostgreSQL only

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override { create_test_database(&server_, &name_, &url_); }
  void TearDown() override {
    if (!name_.empty()) drop_database(server_, name_);
  }

  std::unique_ptr<PostgresStore> open(int pool = 4, const Clock* clock = nullptr) {
    auto options = parse_postgres_url(with_param(url_, "pool=" + std::to_string(pool)));
    EXPECT_TRUE(options.ok()) << options.error().to_string();
    if (!options.ok()) return nullptr;
    options->reconnect_backoff = 10ms;
    if (clock != nullptr) options->clock = clock;
    auto store = PostgresStore::open(*options);
    EXPECT_TRUE(store.ok()) << store.error().to_string();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Terminates the store's connections (application_name cubeplane) and
  // waits until they are gone; returns how many there were.
  std::string drop_store_connections() {
    RawPg raw(url_);
    return raw.text(
        "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = 'cubeplane'");
  }

  std::string server_, name_, url_;
};

Status increment_attempts(Tx& tx, const std::string& task_id) {
  CP_ASSIGN(auto task, tx.get_task(task_id));
  if (!task) return errors::not_found("task", task_id);
  task->attempts += 1;
  CP_TRY(tx.update_task(*task));
  CP_TRY(tx.append_event(make_event("task", task_id, kT0, "task.attempts")));
  return {};
}

TEST_F(PostgresTest, ConcurrentWritersIncrementingOneTaskLoseNoUpdate) {
  // More threads than connections, all on one row: every read-modify-write
  // either commits on the latest value or is rolled back and run again.
  auto store = open(4);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  Task t = make_task("t-1", kT0);
  t.attempts = 0;
  ASSERT_OK(store->write([&](Tx& tx) { return tx.insert_task(t); }));

  constexpr int kThreads = 8;
  constexpr int kIncrements = 25;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int n = 0; n < kIncrements; ++n) {
        Status s = store->write([](Tx& tx) { return increment_attempts(tx, "t-1"); });
        EXPECT_TRUE(s.ok()) << s.error().to_string();
      }
    });
  }
  for (auto& th : threads) th.join();

  std::optional<Task> final_task;
  std::vector<Event> events;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(final_task, tx.get_task("t-1"));
    EventQuery q;
    q.limit = 1000;
    CP_ASSIGN(events, tx.list_events(q));
    return {};
  }));
  ASSERT_TRUE(final_task.has_value());
  EXPECT_EQ(final_task->attempts, kThreads * kIncrements);
  ASSERT_EQ(events.size(), static_cast<std::size_t>(kThreads * kIncrements));
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_LT(events[i - 1].id, events[i].id);
}

TEST_F(PostgresTest, ConcurrentQuotaChecksCannotBothPass) {
  // Each body admits a task only if none is Running in its round: the shape
  // of a quota re-check, reading a set and then writing a row outside it.
  // REPEATABLE READ would let several pass (write skew); SERIALIZABLE lets
  // exactly one, however the bodies interleave.
  auto store = open(4);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  constexpr int kRounds = 10;
  constexpr int kThreads = 4;
  for (int round = 0; round < kRounds; ++round) {
    std::string group = "pg-round-" + std::to_string(round);
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        Status s = store->write([&](Tx& tx) -> Status {
          TaskQuery q;
          q.project_group = group;
          q.states = {TaskState::Running};
          CP_ASSIGN(auto running, tx.list_tasks(q));
          if (!running.items.empty()) return {};
          return tx.insert_task(make_task(group + "-t" + std::to_string(i), kT0 + i, TaskState::Running, group));
        });
        EXPECT_TRUE(s.ok()) << s.error().to_string();
      });
    }
    for (auto& th : threads) th.join();
    TaskQuery q;
    q.project_group = group;
    TaskPage page;
    ASSERT_OK(store->read([&](Tx& tx) -> Status {
      CP_ASSIGN(page, tx.list_tasks(q));
      return {};
    }));
    EXPECT_EQ(page.items.size(), 1u) << group;
  }
}

TEST_F(PostgresTest, EventIdsBecomeVisibleInIncreasingOrder) {
  // A reader that polls with after_id must never skip an event: ids are
  // handed out in commit order even with writers running side by side.
  auto store = open(6);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  constexpr int kWriters = 4;
  constexpr int kEvents = 50;
  std::atomic<int> writers_left{kWriters};
  std::vector<std::int64_t> polled;
  auto poll = [&] {
    EventQuery q;
    q.after_id = polled.empty() ? 0 : polled.back();
    q.limit = 1000;
    std::vector<Event> batch;
    Status s = store->read([&](Tx& tx) -> Status {
      CP_ASSIGN(batch, tx.list_events(q));
      return {};
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    for (const auto& e : batch) polled.push_back(e.id);
  };
  std::thread poller([&] {
    while (writers_left.load() > 0) poll();
    poll();  // after the last commit
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kEvents; ++i) {
        Status s = store->write([&](Tx& tx) -> Status {
          std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
          CP_TRY(tx.insert_task(make_task(id, kT0 + i)));
          CP_TRY(tx.append_event(make_event("task", id, kT0 + i, "task.created")));
          return tx.set_meta("last-" + std::to_string(w), id);
        });
        EXPECT_TRUE(s.ok()) << s.error().to_string();
      }
      --writers_left;
    });
  }
  for (auto& th : writers) th.join();
  poller.join();

  std::vector<Event> all;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    EventQuery q;
    q.limit = 1000;
    CP_ASSIGN(all, tx.list_events(q));
    return {};
  }));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kWriters * kEvents));
  std::vector<std::int64_t> ids;
  for (const auto& e : all) ids.push_back(e.id);
  EXPECT_EQ(polled, ids);
}

TEST_F(PostgresTest, PoolHoldsAtMostPoolSizeConnectionsAndReadersRunTogether) {
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());

  std::latch both_inside(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto hold = [&] {
    Status s = store->read([&](Tx& tx) -> Status {
      CP_TRY(tx.get_meta("k"));
      both_inside.count_down();
      released.wait();
      return {};
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  };
  std::thread first(hold);
  std::thread second(hold);
  both_inside.wait();  // two read transactions open at once

  std::atomic<bool> third_ran{false};
  std::thread third([&] {
    Status s = store->read([&](Tx&) -> Status {
      third_ran = true;
      return {};
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  });
  // The third waits for a connection instead of opening a third one.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (store->pool_stats().waiting < 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  auto stats = store->pool_stats();
  EXPECT_EQ(stats.waiting, 1);
  EXPECT_EQ(stats.open, 2);
  EXPECT_EQ(stats.in_use, 2);
  EXPECT_FALSE(third_ran.load());
  RawPg raw(url_);
  EXPECT_EQ(raw.text("SELECT count(*) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND application_name = 'cubeplane'"),
            "2");

  release.set_value();
  first.join();
  second.join();
  third.join();
  EXPECT_TRUE(third_ran.load());
  stats = store->pool_stats();
  EXPECT_EQ(stats.open, 2);
  EXPECT_EQ(stats.in_use, 0);
}

TEST_F(PostgresTest, ReconnectsAfterTheServerDropsTheConnection) {
  auto store = open(1);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  ASSERT_OK(store->write([](Tx& tx) { return tx.set_meta("k", "1"); }));

  // Dropped while idle in the pool: BEGIN goes out with the body's first
  // statement, so the body notices, and runs again on a new connection.
  EXPECT_EQ(drop_store_connections(), "1");
  int runs = 0;
  EXPECT_OK(store->write([&](Tx& tx) -> Status {
    ++runs;
    return tx.set_meta("k", "2");
  }));
  EXPECT_EQ(runs, 2);

  // Dropped in the middle of a body: the whole body runs again.
  runs = 0;
  EXPECT_OK(store->write([&](Tx& tx) -> Status {
    ++runs;
    CP_TRY(tx.set_meta("k", "3"));
    if (runs == 1) {
      EXPECT_EQ(drop_store_connections(), "1");
    }
    return tx.set_meta("k2", "after");
  }));
  EXPECT_EQ(runs, 2);

  // Reads reconnect too.
  EXPECT_EQ(drop_store_connections(), "1");
  std::optional<std::string> k, k2;
  EXPECT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(k, tx.get_meta("k"));
    CP_ASSIGN(k2, tx.get_meta("k2"));
    return {};
  }));
  EXPECT_EQ(k, std::optional<std::string>("3"));
  EXPECT_EQ(k2, std::optional<std::string>("after"));
  EXPECT_EQ(store->pool_stats().open, 1);
}

TEST_F(PostgresTest, AFailedBeginLeavesTheConnectionUsable) {
  // Before migrate() the writer gate's table does not exist, so BEGIN's LOCK
  // fails inside the transaction. The one pooled connection must come back
  // out of it, not stay in a failed transaction for the next caller.
  auto store = open(1);
  ASSERT_NE(store, nullptr);
  Status early = store->write([](Tx& tx) { return tx.set_meta("k", "v"); });
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, "store_error");
  EXPECT_EQ(early.error().status, 500);
  ASSERT_OK(store->migrate());
  ASSERT_OK(store->write([](Tx& tx) { return tx.set_meta("k", "v"); }));
  EXPECT_EQ(store->pool_stats().open, 1);
}

TEST_F(PostgresTest, HeldWritesGoToTheServerWithCommit) {
  // A submit's shape: a read, then new rows and nothing read after them.
  auto store = open(1);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  auto submit = [&](const std::string& n, bool hold) {
    const std::int64_t before = store->round_trips();
    Status s = store->write([&](Tx& tx) -> Status {
      if (hold) tx.hold_writes();
      CP_TRY(tx.get_meta("k"));
      CP_TRY(tx.insert_pipeline(make_pipeline("p-" + n, "pg-a")));
      Task t = make_task("t-" + n, kT0);
      t.pipeline_id = "p-" + n;
      CP_TRY(tx.insert_task(t));
      CP_TRY(tx.append_event(make_event("task", t.id, kT0, "task.state")));
      AuditEntry a;
      a.id = "audit-" + n;
      a.at = kT0;
      return tx.append_audit(a);
    });
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return store->round_trips() - before;
  };
  // BEGIN goes with the read; then one exchange per row, and COMMIT.
  EXPECT_EQ(submit("1", false), 6);
  // Held: the four rows go with COMMIT.
  EXPECT_EQ(submit("2", true), 2);
  std::optional<Task> got;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(got, tx.get_task("t-2"));
    return {};
  }));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->pipeline_id, "p-2");
  EventQuery q;
  std::vector<Event> events;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(events, tx.list_events(q));
    return {};
  }));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].object_id, "t-2");
  EXPECT_GT(events[1].id, events[0].id);
}

// Group commit (run_one_group): a pool of 2 has one leader.

// A submit's shape, held: counts its runs, reads, then inserts a task.
std::function<Status(Tx&)> held_insert(std::atomic<int>& runs, std::string id) {
  return [&runs, id = std::move(id)](Tx& tx) -> Status {
    ++runs;
    tx.hold_writes();
    CP_TRY(tx.get_meta("first"));
    return tx.insert_task(make_task(id, kT0));
  };
}

std::vector<std::string> tasks_present(Store& store, const std::vector<std::string>& ids) {
  std::vector<std::string> out;
  EXPECT_OK(store.read([&](Tx& tx) -> Status {
    for (const auto& id : ids) {
      CP_ASSIGN(auto t, tx.get_task(id));
      if (t) out.push_back(id);
    }
    return {};
  }));
  return out;
}

TEST_F(PostgresTest, TwoGroupsOfSubmitsCommitAtOnceUnlessTheUrlSaysOtherwise) {
  EXPECT_EQ(open(4)->group_commits(), 2);
  EXPECT_EQ(open(16)->group_commits(), 2);  // a bigger pool serves reads, not smaller groups
  EXPECT_EQ(open(2)->group_commits(), 1);   // at most half the pool
  EXPECT_EQ(open(1)->group_commits(), 1);
  auto options = parse_postgres_url(with_param(url_, "pool=8&group_commits=5"));
  ASSERT_OK(options);
  auto store = PostgresStore::open(*options);
  ASSERT_OK(store);
  EXPECT_EQ((*store)->group_commits(), 5);
}

TEST_F(PostgresTest, WritesQueuedTogetherCommitAsOneGroupEachWithItsOwnOutcome) {
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  std::atomic<int> runs_a{0}, runs_b{0}, runs_c{0};
  // B is refused at its checks, before writing: nothing to undo, so the
  // group commits as it ran, and nobody runs twice. B reads A's row: one
  // transaction.
  std::vector<Status> results;
  const std::int64_t trips_before = store->round_trips();
  run_one_group(*store,
                {held_insert(runs_a, "t-a"),
                 [&](Tx& tx) -> Status {
                   ++runs_b;
                   tx.hold_writes();
                   CP_ASSIGN(auto t, tx.get_task("t-a"));
                   if (!t) return Error{"test", 500, "t-a not seen", "", {}};
                   return Error{"refused", 409, "no", "不", {}};
                 },
                 held_insert(runs_c, "t-c")},
                results);
  EXPECT_OK(results[0]);
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "refused");
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_a.load() + runs_b.load() + runs_c.load(), 3);
  EXPECT_EQ(store->group_stats().groups, 1);
  EXPECT_EQ(store->group_stats().grouped_writes, 3);
  // The first write: BEGIN with its write, COMMIT. The group: each read
  // carries the rows held before it, and COMMIT the last: 3 + 1.
  EXPECT_EQ(store->round_trips() - trips_before, 2 + 4);
  EXPECT_EQ(tasks_present(*store, {"t-a", "t-c"}), (std::vector<std::string>{"t-a", "t-c"}));
}

TEST_F(PostgresTest, AGroupRunsAgainBehindSavepointsWhenABodyFailsAfterWritingOrItsHeldRowFails) {
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  ASSERT_OK(store->write([](Tx& tx) { return tx.insert_task(make_task("t-old", kT0)); }));
  // E fails after writing: the group runs again, each body behind a
  // savepoint, and only E's rows are undone.
  std::atomic<int> runs_d{0}, runs_e{0}, runs_f{0};
  std::vector<Status> results;
  run_one_group(*store,
                {held_insert(runs_d, "t-d"),
                 [&](Tx& tx) -> Status {
                   ++runs_e;
                   CP_TRY(tx.insert_task(make_task("t-e", kT0)));
                   CP_TRY(tx.set_meta("e", "wrote"));
                   return Error{"refused", 409, "no", "不", {}};
                 },
                 held_insert(runs_f, "t-f")},
                results);
  EXPECT_OK(results[0]);
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "refused");
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_d.load(), 2);  // once without savepoints (rolled back), once behind one
  EXPECT_EQ(runs_e.load(), 2);
  EXPECT_EQ(runs_f.load(), 1);  // the first run stopped at E
  EXPECT_EQ(tasks_present(*store, {"t-d", "t-e", "t-f"}), (std::vector<std::string>{"t-d", "t-f"}));
  // H's held row exists already: the unique violation shows only at COMMIT
  // (or with the next body's read), where it cannot be told whose it is.
  // The group runs again behind savepoints: H alone fails, as it would
  // alone, and G and I commit.
  std::atomic<int> runs_g{0}, runs_h{0}, runs_i{0};
  run_one_group(*store, {held_insert(runs_g, "t-g"), held_insert(runs_h, "t-old"), held_insert(runs_i, "t-i")},
                results);
  EXPECT_OK(results[0]);
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "already_exists");
  EXPECT_EQ(results[1].error().status, 409);
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_g.load(), 2);
  EXPECT_EQ(runs_h.load(), 2);
  EXPECT_EQ(runs_i.load(), 2);
  EXPECT_EQ(tasks_present(*store, {"t-g", "t-i"}), (std::vector<std::string>{"t-g", "t-i"}));
  // The same held row as the last write: it fails at COMMIT.
  std::atomic<int> runs_j{0}, runs_k{0};
  run_one_group(*store, {held_insert(runs_j, "t-j"), held_insert(runs_k, "t-old")}, results);
  EXPECT_OK(results[0]);
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "already_exists");
  EXPECT_EQ(tasks_present(*store, {"t-j"}), (std::vector<std::string>{"t-j"}));
}

TEST_F(PostgresTest, ABodyThatThrowsInAGroupThrowsOnItsOwnThreadAndTheOthersCommit) {
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  std::atomic<int> runs_a{0}, runs_c{0};
  std::vector<Status> results;
  run_one_group(*store,
                {held_insert(runs_a, "t-a"),
                 [&](Tx& tx) -> Status {
                   tx.hold_writes();
                   CP_TRY(tx.get_meta("first"));
                   throw std::runtime_error("boom");
                 },
                 held_insert(runs_c, "t-c")},
                results);
  EXPECT_OK(results[0]);
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, "thrown");
  EXPECT_EQ(results[1].error().message, "boom");
  EXPECT_OK(results[2]);
  EXPECT_EQ(runs_a.load() + runs_c.load(), 2);  // it threw before writing: nothing to run again
  EXPECT_EQ(tasks_present(*store, {"t-a", "t-c"}), (std::vector<std::string>{"t-a", "t-c"}));
}

// A submit under alice's idempotency key k-1, in ControlPlane::submit's
// shape: the key looked up first; when found, nothing written; else the
// pipeline and the key, held. `after_lookup` runs once, in the first run.
std::function<Status(Tx&)> keyed_submit(const std::string& pipeline_id, std::function<void()> after_lookup = {}) {
  return [=, first = std::make_shared<bool>(true)](Tx& tx) -> Status {
    tx.hold_writes();
    CP_ASSIGN(auto seen, tx.get_idempotency("alice", "k-1"));
    if (*first && after_lookup) after_lookup();
    *first = false;
    if (seen) return {};
    CP_TRY(tx.insert_pipeline(make_pipeline(pipeline_id, "pg-a")));
    return tx.insert_idempotency(IdempotencyRecord{"alice", "k-1", "h", 201, pipeline_id, kT0});
  };
}

// Which of `ids` are pipelines, and whose answer the key k-1 holds.
std::pair<std::vector<std::string>, std::string> keyed_outcome(Store& store, const std::vector<std::string>& ids) {
  std::vector<std::string> pipelines;
  std::string answer;
  EXPECT_OK(store.read([&](Tx& tx) -> Status {
    for (const auto& id : ids) {
      CP_ASSIGN(auto p, tx.get_pipeline(id));
      if (p) pipelines.push_back(id);
    }
    CP_ASSIGN(auto key, tx.get_idempotency("alice", "k-1"));
    if (key) answer = key->response;
    return {};
  }));
  return {pipelines, answer};
}

TEST_F(PostgresTest, TwoSubmitsUnderOneKeyInOneGroupCreateOnePipeline) {
  // The second body reads the key after the first one's held rows went
  // out: it sees them, in the same transaction, and writes nothing.
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  std::vector<Status> results;
  run_one_group(*store, {keyed_submit("p-a"), keyed_submit("p-b")}, results);
  EXPECT_OK(results[0]);
  EXPECT_OK(results[1]);
  EXPECT_EQ(keyed_outcome(*store, {"p-a", "p-b"}),
            (std::pair<std::vector<std::string>, std::string>{{"p-a"}, "p-a"}));
}

TEST_F(PostgresTest, TwoConcurrentSubmitsUnderOneKeyCreateOnePipeline) {
  // Both look the key up before either writes: both find none. The unique
  // (user, key) lets one commit; the other is refused with already_exists
  // (ControlPlane::submit then replays the stored answer), or rolled back
  // as a serialization failure and run again, when it finds the key.
  auto store = open(4);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  for (int round = 0; round < 5; ++round) {
    const std::string a = "p-a" + std::to_string(round), b = "p-b" + std::to_string(round);
    ASSERT_OK(store->write([](Tx& tx) -> Status {
      CP_TRY(tx.delete_idempotency_before(kT0 + 1, 10));
      return {};
    }));
    std::latch looked_up(2);
    Status results[2];
    std::thread first([&] { results[0] = store->write(keyed_submit(a, [&] { looked_up.arrive_and_wait(); })); });
    std::thread second([&] { results[1] = store->write(keyed_submit(b, [&] { looked_up.arrive_and_wait(); })); });
    first.join();
    second.join();
    auto [pipelines, answer] = keyed_outcome(*store, {a, b});
    ASSERT_EQ(pipelines.size(), 1u) << "round " << round;
    EXPECT_EQ(answer, pipelines[0]);
    for (const Status& r : results) {
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, "already_exists") << r.error().to_string();
      }
    }
    // The one that lost did not commit its pipeline.
    const Status& winner = pipelines[0] == a ? results[0] : results[1];
    EXPECT_OK(winner);
  }
}

TEST_F(PostgresTest, ManyHeldWritesGoInPipelinesOfBoundedLength) {
  // libpq writes a whole pipeline before it reads an answer: a long one
  // could fill the socket both ways. 600 rows go in three round trips.
  auto store = open(1);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  const std::int64_t before = store->round_trips();
  ASSERT_OK(store->write([&](Tx& tx) -> Status {
    tx.hold_writes();
    for (int i = 0; i < 600; ++i) {
      AuditEntry a;
      a.id = "audit-" + std::to_string(1000 + i);
      a.at = kT0 + i;
      CP_TRY(tx.append_audit(a));
    }
    return {};
  }));
  EXPECT_EQ(store->round_trips() - before, 3);
  AuditQuery q;
  q.limit = 1000;
  AuditPage page;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(page, tx.list_audit(q));
    return {};
  }));
  EXPECT_EQ(page.items.size(), 600u);
}

TEST(PostgresChangeNotices, SplitUnderTheLimitAndReadBackWithoutTheirOwn) {
  ChangedRows rows;
  for (int i = 0; i < 1000; ++i) rows.tasks.push_back("t-" + std::to_string(100000 + i));
  rows.attempts = {"t-100000.1"};
  rows.clusters = {"c1"};
  const auto notices = PostgresStore::change_notices("w-1", rows);
  ASSERT_GT(notices.size(), 1u);
  ChangedRows back;
  for (const auto& n : notices) {
    EXPECT_LT(n.size(), PostgresStore::kNotifyBytes);
    EXPECT_TRUE(PostgresStore::parse_change_notice(n, "w-2", back));
    EXPECT_FALSE(PostgresStore::parse_change_notice(n, "w-1", back)) << "its own writer's";
  }
  EXPECT_EQ(back.tasks, rows.tasks);
  EXPECT_EQ(back.attempts, rows.attempts);
  EXPECT_EQ(back.clusters, rows.clusters);
  EXPECT_FALSE(PostgresStore::parse_change_notice("no newline", "w-2", back));
}

// Two processes on one database (server/beacon.h: several servers): what
// one commits reaches the other's change journal and wake-up, once and only
// if it commits; its own writes are not heard twice.
TEST_F(PostgresTest, AnotherStoresCommitsReachThisOnesJournal) {
  auto mine = open(2);
  auto theirs = open(2);
  ASSERT_NE(mine, nullptr);
  ASSERT_NE(theirs, nullptr);
  ASSERT_OK(mine->migrate());
  std::mutex mu;
  std::vector<ChangedRows> heard;
  mine->follow_other_writers([&](const ChangedRows& r) {
    std::lock_guard lock(mu);
    heard.push_back(r);
  });
  // The feed starts by saying it lost track (nobody listened before).
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return !heard.empty();
  }));
  ChangedRows drained;
  EXPECT_FALSE(mine->changes()->take(mine->changes()->last(), drained)) << "read everything once";

  ASSERT_OK(mine->write([&](Tx& tx) { return tx.insert_task(make_task("t-own", kT0)); }));
  Status refused = theirs->write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_task(make_task("t-rolled-back", kT0)));
    return errors::conflict("no", "否");
  });
  EXPECT_FALSE(refused.ok());
  ASSERT_OK(theirs->write([&](Tx& tx) { return tx.insert_task(make_task("t-theirs", kT0)); }));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return heard.size() >= 2;
  }));
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(heard.size(), 2u) << "one notice: the rolled-back write sent none";
    EXPECT_EQ(heard[1].tasks, std::vector<std::string>{"t-theirs"});
  }
  ChangedRows taken;
  EXPECT_TRUE(mine->changes()->take(mine->changes()->last(), taken));
  std::sort(taken.tasks.begin(), taken.tasks.end());
  EXPECT_EQ(taken.tasks, (std::vector<std::string>{"t-own", "t-theirs"})) << "its own once, from its own commit";
}

TEST_F(PostgresTest, TheStoreTellsItsOwnTime) {
  auto store = open(1);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  Millis before = SystemClock::instance().now_ms(), at = 0;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(at, tx.store_time_ms());
    return {};
  }));
  // The test server runs on this machine: one clock.
  EXPECT_GE(at, before - 1000);
  EXPECT_LE(at, SystemClock::instance().now_ms() + 1000);
}

TEST_F(PostgresTest, ASessionFrozenInATransactionIsEndedByTheServer) {
  // A frozen server must not hold its locks, and every other server, for
  // ever: each session sets idle_in_transaction_session_timeout.
  auto options = parse_postgres_url(url_);
  ASSERT_TRUE(options.ok());
  auto conn = pg::Connection::open(options->conninfo, options->display);
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  auto shown = (*conn)->query("SHOW idle_in_transaction_session_timeout", {});
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->text(0, 0), "10s");
  // An operator's own setting stays.
  auto own = pg::Connection::open(with_param(url_, "options=-c%20idle_in_transaction_session_timeout%3D3min"),
                                  options->display);
  ASSERT_TRUE(own.ok()) << own.error().to_string();
  shown = (*own)->query("SHOW idle_in_transaction_session_timeout", {});
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->text(0, 0), "3min");
}

TEST_F(PostgresTest, ServersMigratingAtOnceAllSucceed) {
  // Several servers starting together against one empty database.
  constexpr int kServers = 4;
  std::vector<std::unique_ptr<PostgresStore>> stores;
  for (int i = 0; i < kServers; ++i) {
    stores.push_back(open(1));
    ASSERT_NE(stores.back(), nullptr);
  }
  std::latch start(kServers);
  std::vector<Status> results(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = stores[i]->migrate();
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.error().to_string();
  for (const auto& s : stores) EXPECT_EQ(s->schema_version(), latest_schema_version());
  RawPg raw(url_);
  EXPECT_EQ(raw.text("SELECT count(*) FROM schema_migrations"), std::to_string(migrations().size()));
}

TEST_F(PostgresTest, MigrationsAreStampedAndANewerSchemaIsRefused) {
  SimulatedClock clock(kT0);
  auto store = open(1, &clock);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 0);  // nothing applied yet
  ASSERT_OK(store->migrate());
  RawPg raw(url_);
  EXPECT_EQ(raw.text("SELECT MIN(applied_at) FROM schema_migrations"), std::to_string(kT0));
  // The PostgreSQL-only part of migration 1 ran: events.id has its sequence.
  EXPECT_EQ(raw.text("SELECT pg_get_serial_sequence('events', 'id')"), "public.events_id_seq");

  // An older binary must not run against a database a newer one upgraded.
  ASSERT_TRUE(raw.exec("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)"));
  Status s = open(1)->migrate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "store_error");
  EXPECT_NE(s.error().message.find("999"), std::string::npos);
}

TEST_F(PostgresTest, TextSortsAsBytesWhateverTheDatabaseCollation) {
  // The test databases use an ICU collation, where "a" < "B"; SQLite and
  // so the store order by bytes, where "B" < "a".
  auto store = open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->migrate());
  ASSERT_OK(store->write([](Tx& tx) -> Status {
    for (const char* name : {"b", "ab", "B", "a-c", "a"}) CP_TRY(tx.upsert_user(User{name, PlatformRole::user, kT0}));
    for (const char* id : {"t-a", "t-B", "t-b"}) CP_TRY(tx.insert_task(make_task(id, kT0)));
    return {};
  }));
  std::vector<std::string> names;
  std::vector<std::string> pages;
  ASSERT_OK(store->read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto users, tx.list_users());
    for (const auto& u : users) names.push_back(u.name);
    TaskQuery q;
    q.limit = 1;  // one task per page: the cursor compares ids too
    do {
      CP_ASSIGN(auto page, tx.list_tasks(q));
      for (const auto& t : page.items) pages.push_back(t.id);
      q.cursor = page.next_cursor;
    } while (!q.cursor.empty());
    return {};
  }));
  EXPECT_EQ(names, (std::vector<std::string>{"B", "a", "a-c", "ab", "b"}));
  EXPECT_EQ(pages, (std::vector<std::string>{"t-b", "t-a", "t-B"}));
}

}  // namespace
}  // namespace cp::testing
